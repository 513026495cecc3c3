"""`--executor ray`: the jobs of `verify`, `lock` and `matrix` as Ray tasks.

How work is split: the commands cut their own jobs (see `baseline.executors.Task`) — verify
one model's gates on one backend and target with one toolkit (`classifier rknn-sim/rk3588`),
lock one model, matrix one model × target × toolkit version. A job that uses a toolkit or a
board is one Ray task; small jobs (`Task.small`: onnxruntime only, a few milliseconds each)
go in batches, `BATCHES_PER_CPU` per CPU of the cluster, each a run of consecutive jobs (one
model's jobs stay together and share its session), so that Ray's own cost per task does not
outweigh them. Jobs are independent, so tasks never talk to each other. A Ray worker process
keeps its toolkit worker between tasks, so the ~1.2 s toolkit import is paid once per
process, not per job.

What crosses the network: in, the job's function (by reference: baseline is installed on
every node) and its arguments — the project's absolute paths and the lock narrowed to the
job's one model; out, the job's value (gate results; a model's lock entry with the bytes of
its new tensor and `.rknn` files; a matrix cell) or a one-line error. Models, fixtures and
pinned tensors are read from a filesystem every node mounts at the same path. Everything is
written by the driver, exactly as in a local run: the result cache, the lock, its files.
Jobs the result cache already answers never leave the driver, so a fully cached verify
does not even start Ray.

Toolkits: a task provisions the toolkit environment it needs on its node (cached there under
`BASELINE_TOOLCHAINS`, behind a file lock, so concurrent tasks install it once).

Boards: a job on a board backend (`rknn-device`, `rknnlite`) asks for one unit of a Ray
custom resource named after its platform (`{"rk3588": 1}`); a host with a board offers it
with `ray start --address HEAD --resources '{"rk3588": 1}'`. Simulator and onnxruntime jobs
go anywhere. Before submitting, the driver checks that a live node offers what each job
needs and fails in one line otherwise (such a task would wait forever); a board whose node
leaves mid-run gets `BOARD_GRACE` seconds to come back.

Failures: a worker or node that dies loses only its task, which Ray reruns (`MAX_RETRIES`);
a failing gate is a result, not a retry; a `BaselineError` in a task comes back as data and
is raised again here as the same one-line error.

Larger clusters, the plan: a shared toolchain cache or a Ray `runtime_env` per toolkit so
nodes skip the ~45 s install, object-store transfer of fixtures for nodes without the shared
filesystem, and placement that keeps a model's jobs on one node to reuse its golden run.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import ray
from ray.exceptions import RayError, RayTaskError

from baseline.errors import BackendUnavailable, BaselineError, ConfigError, EnvironmentBroken, InputError
from baseline.executors.base import Done, ExecutorOptions, Task

BATCHES_PER_CPU = 8
"""Batches of small jobs per CPU of the cluster: enough that no worker waits long for the last
one (a batch is an eighth of a worker's share), few enough that Ray's per-task cost is noise."""
MAX_RETRIES = 3
"""Reruns of a job whose worker (or node) died; a gate that fails is a result, not a retry."""
BOARD_GRACE = 60.0
"""Seconds a board resource a waiting task needs may be missing from the cluster mid-run."""
CONNECT_TIMEOUT = 10.0
"""Seconds to wait for the head of the cluster at `--address` to accept a connection."""
CLUSTER_TIMEOUT = 20.0
"""Seconds any one call to the cluster may take: with its head gone, `ray.nodes()` and
`ray.shutdown()` block for ever and `ray.get` retries for ever."""
HEARTBEAT = 5.0
"""Seconds without a finished task after which the driver checks the cluster still answers."""
STALL_ENV = "BASELINE_RAY_TEST_STALL"
"""Test-only (tests/test_ray.py): `<task name>=<file>` makes the first attempt of that task
write its pid to `<file>` and sleep (at most `STALL_SECONDS`) so that the test can kill it."""
STALL_SECONDS = 120.0
_ERRORS = {
    kind.__name__: kind
    for kind in (BaselineError, ConfigError, InputError, BackendUnavailable, EnvironmentBroken)
}
"""Errors a task reports by name and the driver raises again as the same class."""

_nodes: Callable[[], list[dict[str, Any]]] = ray.nodes  # these two are unannotated in ray
_node_ip: Callable[[], str] = ray.util.get_node_ip_address
T = TypeVar("T")


@dataclass(frozen=True)
class TaskRun:
    """One task's value and where it was computed."""

    name: str
    value: Any
    seconds: float
    """How long the call ran in its worker (the last attempt)."""
    node_id: str
    node_ip: str
    pid: int
    resources: dict[str, float]
    """What Ray assigned the task (`CPU`, a board's platform)."""


def run_on_ray(tasks: list[Task], options: ExecutorOptions, done: Done | None = None) -> list[TaskRun]:
    """Submit every task and wait for all; the first error (as it arrives) cancels the toolkit and
    board tasks still pending (batches of small jobs are left to end: see `_gather`)."""
    started = _connect(options.address)
    try:
        nodes = _live_nodes(options.address)
        for task in tasks:
            _check_offered(task, nodes)
        remote = ray.remote(_run_batch)
        batches = _batches(tasks, sum(node.get("CPU", 0.0) for node in nodes))
        refs = [
            remote.options(
                num_cpus=1,
                resources=tasks[batch[0]].resources,
                max_retries=MAX_RETRIES,
                retry_exceptions=False,
                name=_batch_name(tasks, batch),
            ).remote([(tasks[i].name, tasks[i].call, tasks[i].args) for i in batch])
            for batch in batches
        ]
        return _gather(refs, batches, tasks, done, options.address)
    finally:
        if started:
            _shutdown(options.address)


def _batches(tasks: list[Task], cpus: float) -> list[list[int]]:
    """Task indices as Ray tasks: each large task alone; the small ones, in their order, cut into
    at most `BATCHES_PER_CPU` runs per CPU of the cluster, of sizes that differ by at most one."""
    large = [[index] for index, task in enumerate(tasks) if not task.small]
    small = [index for index, task in enumerate(tasks) if task.small]
    count = min(len(small), max(1, int(cpus)) * BATCHES_PER_CPU)
    cuts = [len(small) * part // count for part in range(count + 1)] if count else []
    return large + [small[start:end] for start, end in itertools.pairwise(cuts)]


def _batch_name(tasks: list[Task], batch: list[int]) -> str:
    first = tasks[batch[0]].name
    return first if len(batch) == 1 else f"{first} and {len(batch) - 1} more"


def _shutdown(address: str | None) -> None:
    """`ray.shutdown()`, bounded and silent (an error is already on its way, or the work is
    done): with the cluster gone it never returns, and at exit neither would Ray's own call."""
    try:
        _bounded(ray.shutdown, "ray.shutdown()", address)
    except BaselineError:
        import atexit

        atexit.unregister(ray.shutdown)


def _connect(address: str | None) -> bool:
    """Join the cluster at `address`, or start a local one; True if this call started Ray."""
    if ray.is_initialized():
        return False
    if address:
        _check_reachable(address)
    ours = signal.getsignal(signal.SIGTERM)
    try:
        ray.init(
            # no address: a cluster of our own, never one another process left running here
            # (plain `ray.init()` joins it, and hangs when it goes away)
            address=address or "local",
            ignore_reinit_error=True,
            include_dashboard=False,
            log_to_driver=False,  # workers' output must not mix into a JSON report on stdout
            logging_level=logging.WARNING,
        )
    except (ConnectionError, RuntimeError, ValueError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise BaselineError(f"cannot connect to {_where(address)}: {first}") from None
    finally:
        # ray.init replaces the SIGTERM handler with a bare sys.exit: keep baseline's, which
        # cancels the tasks, kills workers and removes scratch (see baseline.runtime.children)
        if ours is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, ours)
    return True


def _where(address: str | None) -> str:
    return f"the Ray cluster at {address}" if address else "the local Ray cluster"


def _bounded(call: Callable[[], T], what: str, address: str | None) -> T:
    """`call()`, or a one-line error if the cluster does not answer within `CLUSTER_TIMEOUT`.

    Ray's blocking calls cannot be interrupted, so the call runs in a daemon thread that is
    abandoned (never joined) when it overruns."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as error:  # handed to the caller's thread
            box["error"] = error

    thread = threading.Thread(target=run, name="baseline-ray-call", daemon=True)
    thread.start()
    thread.join(CLUSTER_TIMEOUT)
    if thread.is_alive():
        raise BaselineError(
            f"{_where(address)} stopped answering: {what} got no reply within {CLUSTER_TIMEOUT:g} s; "
            "check it with `ray status` (or drop --executor ray) and run again"
        )
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value


def _check_reachable(address: str) -> None:
    """Fail in seconds, not minutes, on a head nobody answers at (ray.init retries for long)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", "local": ray.init resolves and reports them itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT).close()
    except OSError as error:
        raise BaselineError(
            f"cannot reach the Ray cluster at {address} ({error.strerror or error}); is `ray start --head` "
            "running there, and is the address the head's IP and GCS port (default 6379)?"
        ) from None


def _live_nodes(address: str | None) -> list[dict[str, float]]:
    nodes = _bounded(_nodes, "the node list", address)
    return [dict(node["Resources"]) for node in nodes if node.get("Alive")]


def _check_offered(task: Task, nodes: list[dict[str, float]]) -> None:
    """Refuse, in one line, a task that no live node could ever run."""
    if not task.resources or any(_fits(task.resources, node) for node in nodes):
        return
    names = ", ".join(sorted(task.resources))
    offer = ", ".join(f'"{name}": 1' for name in sorted(task.resources))
    raise BaselineError(
        f"{task.owner or task.name} needs a board ({names}), but no node of the Ray cluster offers "
        f"{'it' if len(task.resources) == 1 else 'them together'}; start a node on the board's host "
        f"with `ray start --address HEAD --resources '{{{offer}}}'`"
    )


def _fits(demand: dict[str, float], node: dict[str, float]) -> bool:
    return node.get("CPU", 0.0) >= 1 and all(node.get(name, 0.0) >= need for name, need in demand.items())


def _gather(
    refs: list[Any], batches: list[list[int]], tasks: list[Task], done: Done | None, address: str | None
) -> list[TaskRun]:
    """Every task's run, in task order; the first error cancels the large tasks still pending.
    Every `HEARTBEAT` seconds without a result the cluster must answer (`_live_nodes`)."""
    index = {ref: position for position, ref in enumerate(refs)}
    runs: list[TaskRun | None] = [None] * len(tasks)
    pending = list(refs)
    missing_since: float | None = None
    last_news = time.monotonic()
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=1.0)
            for ref in ready:
                batch = batches[index[ref]]
                reply = _reply(ref, _whose(tasks, batch))
                for task_index, job in zip(batch, reply["jobs"], strict=False):
                    run = _task_run(tasks[task_index], reply, job)
                    runs[task_index] = run
                    if done is not None:
                        done(task_index, run.value, run.seconds)
            if ready or not pending:
                last_news = time.monotonic()
                continue
            if time.monotonic() - last_news < HEARTBEAT:
                continue
            last_news = time.monotonic()
            nodes = _live_nodes(address)
            waiting = [tasks[i] for ref in pending for i in batches[index[ref]]]
            missing_since = _watch_boards(waiting, missing_since, nodes)
    except BaseException:
        # batches of small jobs end within moments: left to finish, never cancelled (Ray 2.60's
        # driver aborted on a cancel that met a batch's completion: "Tried to complete task that
        # was not pending", exit code 1, in one CI run of tests/test_ray.py)
        _cancel([ref for ref in pending if not tasks[batches[index[ref]][0]].small], address)
        raise
    return [run for run in runs if run is not None]


def _cancel(refs: list[Any], address: str | None) -> None:
    """Cancel what is still pending, best-effort and bounded: the cluster may be what failed."""

    def cancel_all() -> None:
        if not refs:
            return
        _, running = ray.wait(refs, num_returns=len(refs), timeout=0)  # finished: nothing to cancel
        for ref in running:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # a task that finished or whose node is gone: nothing to cancel
                continue

    with contextlib.suppress(BaselineError):  # the error being raised already says what went wrong
        _bounded(cancel_all, "cancelling the pending tasks", address)


def _watch_boards(
    waiting: list[Task], missing_since: float | None, nodes: list[dict[str, float]]
) -> float | None:
    """A board whose node left mid-run: wait `BOARD_GRACE` seconds for it, then fail in one line."""
    needed = [task for task in waiting if task.resources]
    if not needed:
        return None
    if all(any(_fits(task.resources, node) for node in nodes) for task in needed):
        return None
    now = time.monotonic()
    if missing_since is None:
        return now
    if now - missing_since > BOARD_GRACE:
        for task in needed:
            _check_offered(task, nodes)
    return missing_since


def _whose(tasks: list[Task], batch: list[int]) -> str:
    first = tasks[batch[0]].owner or tasks[batch[0]].name
    return first if len(batch) == 1 else f"{first} and the {len(batch) - 1} other job(s) of its batch"


def _reply(ref: Any, whose: str) -> dict[str, Any]:
    try:
        reply: dict[str, Any] = ray.get(ref, timeout=CLUSTER_TIMEOUT)  # it is ready: a stall is the cluster
    except RayTaskError:
        raise  # a bug in baseline: keep its traceback
    except RayError as error:  # the worker or node died more than MAX_RETRIES times, or Ray failed
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise BaselineError(f"{whose}: Ray could not run it ({type(error).__name__}: {first})") from None
    return reply


def _task_run(task: Task, where: dict[str, Any], job: dict[str, Any]) -> TaskRun:
    if "error" in job:
        raise _ERRORS.get(str(job.get("kind")), BaselineError)(str(job["error"]))
    return TaskRun(
        name=task.name,
        value=job["value"],
        seconds=float(job["seconds"]),
        node_id=str(where["node_id"]),
        node_ip=str(where["node_ip"]),
        pid=int(where["pid"]),
        resources={str(name): float(amount) for name, amount in where["resources"].items()},
    )


def _run_batch(jobs: list[tuple[str, Callable[..., Any], tuple[Any, ...]]]) -> dict[str, Any]:
    """The Ray task: its jobs one after the other in this worker process, and where. Each job's
    value or one-line error; the first error ends the batch (the driver raises it)."""
    context: Any = ray.get_runtime_context()
    replies: list[dict[str, Any]] = []
    for name, call, args in jobs:
        replies.append(_run_job(name, call, args))
        if "error" in replies[-1]:
            break
    return {
        "node_id": context.get_node_id(),
        "node_ip": _node_ip(),
        "pid": os.getpid(),
        "resources": dict(context.get_assigned_resources()),
        "jobs": replies,
    }


def _run_job(name: str, call: Callable[..., Any], args: tuple[Any, ...]) -> dict[str, Any]:
    _stall_for_test(name)
    started = time.perf_counter()
    try:
        return {"value": call(*args), "seconds": time.perf_counter() - started}
    except BaselineError as error:
        return {"error": str(error), "kind": type(error).__name__}
    except OSError as error:
        message = f"{error.filename}: {error.strerror}" if error.filename else str(error)
        return {
            "error": f"{message} (on Ray node {_node_ip()}: every node must see the project "
            "at the same path, on a shared filesystem)",
        }


def _stall_for_test(name: str) -> None:
    """The test hook of `STALL_ENV`: only the first attempt (the one that creates the file) stalls."""
    wanted, _, marker = os.environ.get(STALL_ENV, "").partition("=")
    if wanted != name or not marker:
        return
    scratch = Path(f"{marker}.{os.getpid()}")
    scratch.write_text(str(os.getpid()))
    try:
        os.link(scratch, marker)  # atomic and exclusive: a retry finds the file and runs normally
    except FileExistsError:
        return
    finally:
        scratch.unlink()
    time.sleep(STALL_SECONDS)
