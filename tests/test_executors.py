"""The local executor: values in task order, progress as each task finishes, fail fast."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from baseline.errors import InputError
from baseline.executors import ExecutorOptions, Task, run_in_threads, run_tasks
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


def test_a_forked_child_killed_before_its_own_session_is_ended_and_reaped(tmp_path: Path) -> None:
    """`children.kill` right after `children.fork`: the copy may not have called `setsid` yet,
    so no group of its id exists; it is killed by its pid instead of waited for for ever."""
    for _ in range(20):
        child = children.fork(lambda: time.sleep(60), (), tmp_path)
        started = time.monotonic()
        children.kill(child)
        assert time.monotonic() - started < 5 and child.returncode is not None
