"""The local executor: values in task order, progress as each task finishes, fail fast."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from baseline.errors import InputError
from baseline.executors import ExecutorOptions, Task, run_in_threads, run_tasks
from baseline.executors.processes import WorkerDied, can_use, run_in_processes
from baseline.runtime import children


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


# --- forked worker processes (`baseline.executors.processes`) ---


def _pid_and(value: int) -> tuple[int, int]:
    return os.getpid(), value * 2


def _fail_on(value: int) -> int:
    if value == 3:
        raise InputError("models/m3.onnx: not a valid ONNX model")
    time.sleep(0.05)
    return value


def _die() -> None:
    os._exit(9)


def test_worker_processes_return_every_value_in_task_order_and_report_each() -> None:
    tasks = [Task(f"t{i}", _pid_and, (i,)) for i in range(12)]
    reported: list[int] = []
    before = set(children.live_pids())  # an ONNX helper an earlier test kept stays alive
    values = run_in_processes(
        tasks, [[0, 1, 2], [3], [4, 5], [6, 7, 8, 9], [10, 11]], 2, lambda i, v, s: reported.append(i)
    )
    assert [value for _, value in values] == [i * 2 for i in range(12)]
    pids = {pid for pid, _ in values}
    assert len(pids) == 2 and os.getpid() in pids, "this process and a forked worker"
    assert values[0][0] == os.getpid(), "this process runs the first group itself"
    assert sorted(reported) == list(range(12))
    assert set(children.live_pids()) == before, "every worker was waited for"


def test_a_group_runs_in_one_worker_in_its_order() -> None:
    tasks = [Task(f"t{i}", _pid_and, (i,)) for i in range(8)]
    reported: list[int] = []
    values = run_in_processes(tasks, [[3, 1, 2], [0, 7, 6, 5, 4]], 2, lambda i, v, s: reported.append(i))
    assert len({values[i][0] for i in (3, 1, 2)}) == 1 and len({values[i][0] for i in (0, 7, 6, 5, 4)}) == 1
    first, second = [i for i in reported if i in (3, 1, 2)], [i for i in reported if i not in (3, 1, 2)]
    assert first == [3, 1, 2] and second == [0, 7, 6, 5, 4]


def test_a_job_s_error_in_a_worker_is_raised_as_itself_and_no_worker_is_left() -> None:
    tasks = [Task(f"t{i}", _fail_on, (i,)) for i in range(40)]
    before = set(children.live_pids())
    with pytest.raises(InputError, match="m3.onnx: not a valid ONNX model"):
        run_in_processes(tasks, [[i] for i in range(40)], 2)
    assert set(children.live_pids()) == before


def test_a_worker_that_dies_is_an_error_naming_what_was_lost() -> None:
    tasks = [Task("dies", _die, ()), Task("fine", os.getpid, ())]
    before = set(children.live_pids())
    with pytest.raises(WorkerDied, match=r"1 job\(s\) unanswered \(exit code 9"):
        run_in_processes(tasks, [[1], [0]], 2)
    assert set(children.live_pids()) == before


def test_worker_processes_need_linux_and_no_other_thread() -> None:
    assert can_use(2) is children.can_fork()
    assert not can_use(1)
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert not can_use(2), "a fork would copy a lock another thread may hold"
    finally:
        release.set()
        other.join()


def test_a_forked_child_killed_before_its_own_session_is_ended_and_reaped(tmp_path: Path) -> None:
    """`children.kill` right after `children.fork`: the copy may not have called `setsid` yet,
    so its group does not exist; it is killed by its pid instead of waited for forever."""
    for _ in range(20):
        child = children.fork(lambda: time.sleep(60), (), tmp_path)
        started = time.monotonic()
        children.kill(child)
        assert time.monotonic() - started < 5 and child.returncode is not None
