"""`baseline verify --executor ray`: a model zoo's verification as Ray tasks, one per model.

How work is split: one task per model. A model is the unit the result cache keys and stores
(one entry per model, from the hashes of everything its gates depend on), and its gates share
one toolkit worker, whose ~1.2 s import a Ray worker process pays once and then reuses for
every model it is given. Models are independent, so tasks need no communication.

What crosses the network: in, the absolute paths of the lock, the intent and the project
root, plus a model name; out, the model's gate results as JSON-able dicts (or a one-line
error). Models, fixtures, tensors, `.rknn` files and the result cache stay on a filesystem
every node mounts at the same path; each task rebuilds the project from those paths and runs
`verify_project(..., only=[model])`, which provisions the toolkit environment on the node
that runs it (cached there, under a file lock) and reads and writes the shared result cache.

Boards: a model with a board backend (`rknn-device`, `rknnlite`) asks for one unit of a Ray
custom resource per target platform (`{"rk3588": 1}`); a host with a board attached offers it
with `ray start --address HEAD --resources '{"rk3588": 1}'`. Before submitting, the driver
checks that some live node offers every resource a model needs, and fails with one line if
none does (a task nobody can run would otherwise wait forever).

Failures: a worker or node that dies loses only its task, which Ray reruns (`max_retries`);
a `BaselineError` in a task comes back as data and is raised again, as one line, here.

Larger clusters, the plan: jobs become model × target × toolkit × backend (a board job on the
board's node, conversions anywhere), toolkit environments travel as a Ray `runtime_env` or a
shared toolchain cache (`BASELINE_TOOLCHAINS`), and boards stay custom resources.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayError, RayTaskError

from baseline.errors import BackendUnavailable, BaselineError, ConfigError, InputError
from baseline.models.lock import ModelLock
from baseline.models.results import GateResult
from baseline.project import Project
from baseline.verify import VerifyOptions, plan, verify_project

BOARD_BACKENDS = ("rknn-device", "rknnlite")
"""Backends that need the physical board of their target's platform."""
MAX_RETRIES = 3
"""Reruns of a model whose worker (or node) died; a gate that fails is a result, not a retry."""
BOARD_GRACE = 60.0
"""Seconds a board resource a waiting task needs may be missing from the cluster mid-run."""
CONNECT_TIMEOUT = 10.0
"""Seconds to wait for the head of the cluster at `--address` to accept a connection."""
STALL_ENV = "BASELINE_RAY_TEST_STALL"
"""Test-only (tests/test_ray.py): `<model>:<file>` makes the first attempt of that model's task
write its pid to `<file>` and sleep (at most `STALL_SECONDS`) so that the test can kill it."""
STALL_SECONDS = 120.0
_ERRORS = {kind.__name__: kind for kind in (BaselineError, ConfigError, InputError, BackendUnavailable)}
"""Errors a task reports by name and the driver raises again as the same class."""

_nodes: Callable[[], list[dict[str, Any]]] = ray.nodes  # these two are unannotated in ray
_node_ip: Callable[[], str] = ray.util.get_node_ip_address

Advance = Callable[[int, str], None]
"""Progress: (gate jobs just finished, label), called as each model's task completes."""


@dataclass(frozen=True)
class ModelRun:
    """One model's results and where they were computed."""

    model: str
    results: list[GateResult]
    node_id: str
    node_ip: str
    pid: int
    resources: dict[str, float]
    """What Ray assigned the task (`CPU`, a board's platform)."""


def verify_models(
    project: Project, models: list[ModelLock], options: VerifyOptions, advance: Advance | None = None
) -> list[list[GateResult]]:
    """Each model's gate results, in model order, computed by Ray tasks."""
    return [run.results for run in run_models(project, models, options, advance)]


def board_resources(model: ModelLock) -> dict[str, float]:
    """The Ray custom resources a model's task asks for: one unit (a board runs one model at a
    time) of each platform it runs on with a board backend; nothing for simulator-only models."""
    if not any(backend in BOARD_BACKENDS for backend in model.backends):
        return {}
    return {target.platform: 1.0 for target in model.targets}


def run_models(
    project: Project, models: list[ModelLock], options: VerifyOptions, advance: Advance | None = None
) -> list[ModelRun]:
    """Submit one task per model, wait for all, raise the first error in model order."""
    started = _connect(options.address)
    try:
        demands = [board_resources(model) for model in models]
        nodes = _live_nodes()
        for model, demand in zip(models, demands, strict=True):
            _check_offered(model, demand, nodes)
        task = ray.remote(_verify_one)
        paths = (
            str(project.lock_path.resolve()),
            str(project.intent_path.resolve()),
            str(project.root.resolve()),
        )
        refs = [
            task.options(
                num_cpus=1,
                resources=demand,
                max_retries=MAX_RETRIES,
                retry_exceptions=False,
                name=f"baseline verify {model.name}",
            ).remote(*paths, model.name, options.use_cache)
            for model, demand in zip(models, demands, strict=True)
        ]
        replies = _gather(refs, models, demands, advance)
    finally:
        if started:
            ray.shutdown()
    return [_model_run(model, reply) for model, reply in zip(models, replies, strict=True)]


def _connect(address: str | None) -> bool:
    """Join the cluster at `address`, or start a local one; True if this call started Ray."""
    if ray.is_initialized():
        return False
    if address:
        _check_reachable(address)
    try:
        ray.init(
            address=address or None,
            ignore_reinit_error=True,
            include_dashboard=False,
            log_to_driver=False,  # workers' output must not mix into a JSON report on stdout
            logging_level=logging.WARNING,
        )
    except (ConnectionError, RuntimeError, ValueError) as error:
        where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise BaselineError(f"cannot connect to {where}: {first}") from None
    return True


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


def _live_nodes() -> list[dict[str, float]]:
    return [dict(node["Resources"]) for node in _nodes() if node.get("Alive")]


def _check_offered(model: ModelLock, demand: dict[str, float], nodes: list[dict[str, float]]) -> None:
    """Refuse, in one line, a task that no live node could ever run."""
    if not demand or any(_fits(demand, node) for node in nodes):
        return
    names = ", ".join(sorted(demand))
    offer = ", ".join(f'"{name}": 1' for name in sorted(demand))
    backends = ", ".join(backend for backend in model.backends if backend in BOARD_BACKENDS)
    raise BaselineError(
        f"model {model.name!r} needs a board ({names}) for its {backends} backend, "
        f"but no node of the Ray cluster offers {'it' if len(demand) == 1 else 'them together'}; "
        f"start a node on the board's host with `ray start --address HEAD --resources '{{{offer}}}'`"
    )


def _fits(demand: dict[str, float], node: dict[str, float]) -> bool:
    return node.get("CPU", 0.0) >= 1 and all(node.get(name, 0.0) >= need for name, need in demand.items())


def _gather(
    refs: list[Any], models: list[ModelLock], demands: list[dict[str, float]], advance: Advance | None
) -> list[dict[str, Any]]:
    """Every task's reply, in model order. Waits for all, as the local executor does."""
    index = {ref: position for position, ref in enumerate(refs)}
    replies: list[dict[str, Any] | None] = [None] * len(refs)
    pending = list(refs)
    missing_since: float | None = None
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=1.0)
            for ref in ready:
                position = index[ref]
                replies[position] = _reply(ref, models[position].name)
                if advance is not None:
                    advance(len(plan([models[position]])), f"{models[position].name} (ray)")
            if ready or not pending:
                continue
            waiting = [(models[index[ref]], demands[index[ref]]) for ref in pending]
            missing_since = _watch_boards(waiting, missing_since)
    except BaseException:
        for ref in pending:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        raise
    return [reply for reply in replies if reply is not None]


def _watch_boards(
    waiting: list[tuple[ModelLock, dict[str, float]]], missing_since: float | None
) -> float | None:
    """A board whose node left mid-run: wait `BOARD_GRACE` seconds for it, then fail in one line."""
    needed = [(model, demand) for model, demand in waiting if demand]
    if not needed:
        return None
    nodes = _live_nodes()
    if all(any(_fits(demand, node) for node in nodes) for _, demand in needed):
        return None
    now = time.monotonic()
    if missing_since is None:
        return now
    if now - missing_since > BOARD_GRACE:
        for model, demand in needed:
            _check_offered(model, demand, nodes)
    return missing_since


def _reply(ref: Any, model: str) -> dict[str, Any]:
    try:
        reply: dict[str, Any] = ray.get(ref)
    except RayTaskError:
        raise  # a bug in baseline: keep its traceback
    except RayError as error:  # the worker or node died more than MAX_RETRIES times, or Ray failed
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise BaselineError(
            f"model {model!r}: Ray could not run its verification ({type(error).__name__}: {first})"
        ) from None
    return reply


def _model_run(model: ModelLock, reply: dict[str, Any]) -> ModelRun:
    if "error" in reply:
        raise _ERRORS.get(str(reply.get("kind")), BaselineError)(str(reply["error"]))
    return ModelRun(
        model=model.name,
        results=[GateResult.model_validate(item) for item in reply["results"]],
        node_id=str(reply["node_id"]),
        node_ip=str(reply["node_ip"]),
        pid=int(reply["pid"]),
        resources={str(name): float(amount) for name, amount in reply["resources"].items()},
    )


def _verify_one(lock: str, intent: str, root: str, model: str, use_cache: bool) -> dict[str, Any]:
    """The task: verify one model in this Ray worker process; results or a one-line error."""
    _stall_for_test(model)
    context: Any = ray.get_runtime_context()
    where: dict[str, Any] = {
        "node_id": context.get_node_id(),
        "node_ip": _node_ip(),
        "pid": os.getpid(),
        "resources": dict(context.get_assigned_resources()),
    }
    try:
        project = Project.locate(Path(lock), Path(intent), Path(root))
        report = verify_project(project, only=[model], options=VerifyOptions(use_cache=use_cache, jobs=1))
    except BaselineError as error:
        return {**where, "error": str(error), "kind": type(error).__name__}
    except OSError as error:
        message = f"{error.filename}: {error.strerror}" if error.filename else str(error)
        return {
            **where,
            "error": f"{message} (on Ray node {where['node_ip']}: every node must see the project "
            "at the same path, on a shared filesystem)",
        }
    return {**where, "results": [result.model_dump(mode="json") for result in report.results]}


def _stall_for_test(model: str) -> None:
    """The test hook of `STALL_ENV`: only the first attempt (the one that creates the file) stalls."""
    name, _, marker = os.environ.get(STALL_ENV, "").partition(":")
    if name != model or not marker:
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
