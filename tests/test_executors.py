"""The local executor: values in task order, progress as each task finishes, fail fast."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from baseline.errors import InputError
from baseline.executors import ExecutorOptions, Task, run_in_threads, run_tasks
from baseline.runtime import children

ROOT = Path(__file__).resolve().parent.parent


def test_each_task_is_reported_as_it_finishes_not_when_all_have() -> None:
    fast_reported = threading.Event()
    seen: list[int] = []

    def done(index: int, value: object, seconds: float) -> None:
        seen.append(index)
        if index == 1:
            fast_reported.set()

    slow = Task("slow", lambda: fast_reported.wait(timeout=10), ())
    fast = Task("fast", lambda: "fast", ())
    assert run_in_threads([slow, fast], jobs=2, done=done) == [True, "fast"], "slow saw fast reported"
    assert seen == [1, 0]


def _fail() -> None:
    raise InputError("models/m.onnx: not a valid ONNX model")


def test_the_first_error_is_raised_and_waiting_tasks_never_start() -> None:
    started: list[int] = []
    tasks = [Task("fail", _fail, ()), *[Task(f"t{i}", started.append, (i,)) for i in range(6)]]
    with pytest.raises(InputError, match="not a valid ONNX model"):
        run_tasks(tasks, ExecutorOptions(jobs=1))
    time.sleep(0.01)
    assert started == [], "not even the task the worker thread would have taken next"


def test_after_an_error_the_running_jobs_finish_before_it_is_raised_and_nothing_is_left() -> None:
    """A failed lock left a job thread converting the next model after the call had returned
    (found by the test suite's toolkit guard: it reached the toolkit during the next test)."""
    running, finished = threading.Event(), threading.Event()
    started: list[int] = []

    def slow() -> None:
        running.set()
        time.sleep(0.3)
        finished.set()

    def fail_once_slow_runs() -> None:
        running.wait(10)
        _fail()

    late = Task("late", started.append, (1,))
    tasks = [Task("slow", slow, ()), Task("fail", fail_once_slow_runs, ()), late]
    with pytest.raises(InputError):
        run_in_threads(tasks, jobs=2)
    assert finished.is_set() and started == []
    assert not [t for t in threading.enumerate() if t.name.startswith("baseline-job")]


def test_no_tasks_need_no_executor() -> None:
    assert run_tasks([], ExecutorOptions(executor="ray")) == [], "Ray is not even imported"


class SlowToBuild:
    """A backend whose construction takes long enough for two threads to meet in it."""

    built = 0

    def __init__(self) -> None:
        time.sleep(0.2)
        SlowToBuild.built += 1


def test_parallel_jobs_share_one_backend_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two jobs asking for a backend at once get the same one: a second simulator instance was
    collected with its scratch folder while its job still read the `.rknn` built there."""
    from baseline import backends

    entry = backends.BackendEntry("tests.test_executors", "SlowToBuild", "-", backends.Capabilities())
    monkeypatch.setitem(backends.REGISTRY, "slow", entry)
    monkeypatch.setattr(backends, "_instances", {})
    SlowToBuild.built = 0
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(backends.get_backend("slow"))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert got[0] is got[1] and SlowToBuild.built == 1


def test_a_forked_child_killed_before_its_own_session_is_ended_and_reaped(tmp_path: Path) -> None:
    """`children.kill` right after `children.fork`: the copy may not have called `setsid` yet,
    so no group of its id exists; it is killed by its pid instead of waited for for ever."""
    for _ in range(20):
        child = children.fork(lambda: time.sleep(60), (), tmp_path)
        started = time.monotonic()
        children.kill(child)
        assert time.monotonic() - started < 5 and child.returncode is not None


FORKS_AND_WAITS = """
import os, sys, time
from baseline.runtime.isolated import HELPERS, run_limited
HELPERS.prestart(fork=True)
print(run_limited(os.getpid, (), 30, "pid", ""), flush=True)
run_limited(time.sleep, (120,), 300, "sleep", "")  # a call that runs long (a graph that never ends)
"""


def test_a_forked_helper_ends_with_the_process_that_forked_it_even_killed_outright(tmp_path: Path) -> None:
    """`kill -9` of baseline runs no handler: the helper, in its own session, used to run on to
    the end of its current call (a graph that never ends: its whole time limit)."""
    parent = subprocess.Popen([sys.executable, "-c", FORKS_AND_WAITS], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        helper = int(parent.stdout.readline())
        assert helper != parent.pid and children._running(helper)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 10
    while children._running(helper) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not children._running(helper)


# --- worker processes (`baseline.executors.processes`), always in a fresh process: a fork is
# safe only where the forking thread is the process's only one, which pytest's is not ---

EXECUTOR_SCRIPT = """
import json, os, sys, time
from baseline.errors import InputError
from baseline.executors import Task
from baseline.executors.processes import WorkerDied, can_use, run_in_processes

def pid_and(value):
    return os.getpid(), value * 2

def fail_on(value):
    if value == 3:
        raise InputError("models/m3.onnx: not a valid ONNX model")
    time.sleep(0.05)
    return value

def die():
    os._exit(9)

found = {"can_use": can_use(2), "caller": os.getpid()}
reported = []
values = run_in_processes(
    [Task(f"t{i}", pid_and, (i,)) for i in range(12)],
    [[0, 1, 2], [3], [4, 5], [6, 7, 8, 9], [10, 11]], 2, lambda i, v, s: reported.append(i),
)
found["values"], found["reported"] = values, reported
for name, tasks, groups in (
    ("error", [Task(f"t{i}", fail_on, (i,)) for i in range(40)], [[i] for i in range(40)]),
    ("died", [Task("dies", die, ()), Task("fine", os.getpid, ())], [[1], [0]]),
):
    try:
        run_in_processes(tasks, groups, 2)
    except (InputError, WorkerDied) as error:
        found[name] = f"{type(error).__name__}: {error}"
def parent_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[2])
    except OSError:  # ended meanwhile: some other process's
        return None

found["left"] = [int(pid) for pid in os.listdir("/proc") if pid.isdigit() and parent_of(pid) == os.getpid()]
print(json.dumps(found))
"""


def _fresh_python(script: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_worker_processes_answer_in_task_order_raise_a_job_s_error_and_name_a_dead_worker() -> None:
    run = _fresh_python(EXECUTOR_SCRIPT)
    assert run.returncode == 0, run.stderr
    found = json.loads(run.stdout)
    assert found["can_use"], "a fresh single-threaded process may fork"
    values = found["values"]
    assert [value for _, value in values] == [i * 2 for i in range(12)]
    pids = {pid for pid, _ in values}
    assert len(pids) == 2 and found["caller"] in pids, "this process and a forked worker"
    assert values[0][0] == found["caller"], "the caller runs the first group itself"
    for group in ([0, 1, 2], [3], [4, 5], [6, 7, 8, 9], [10, 11]):
        assert len({values[i][0] for i in group}) == 1, "a group runs in one process"
        assert [i for i in found["reported"] if i in group] == group, "in its order"
    assert sorted(found["reported"]) == list(range(12))
    assert found["error"] == "InputError: models/m3.onnx: not a valid ONNX model"
    assert found["died"].startswith(
        "WorkerDied: a verify worker process ended with 1 job(s) unanswered (exit code 9"
    )
    assert found["left"] == [], "every worker was waited for"


CAN_USE_SCRIPT = """
import faulthandler, threading
from baseline.executors.processes import can_use
print(can_use(2), can_use(1))
faulthandler.dump_traceback_later(60)  # a native thread `threading` does not list
print(can_use(2), threading.active_count())
faulthandler.cancel_dump_traceback_later()
release = threading.Event()
other = threading.Thread(target=release.wait)
other.start()
print(can_use(2))
release.set()
"""


def test_worker_processes_are_used_only_where_this_thread_is_the_process_s_only_one() -> None:
    """A fork copies one thread: a lock another thread held stays held in the copy. A worker
    forked from a process with onnxruntime's native pool hung in a futex wait."""
    run = _fresh_python(CAN_USE_SCRIPT)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[:3] == ["True False", "False 1", "False"]
