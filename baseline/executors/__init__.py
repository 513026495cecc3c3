"""Where independent jobs run: threads in this process (the default) or Ray tasks.

`verify`, `lock` and `matrix` each cut their work into independent jobs and hand them here
as `Task`s: a module-level function and plain, picklable arguments. The same call runs in a
thread here or, unchanged, in a Ray worker on another host — which is what keeps local and
Ray results identical. Ray is imported only when chosen.
"""

from __future__ import annotations

import functools
import importlib.util
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from baseline.errors import BackendUnavailable

EXECUTORS = ("local", "ray")
"""`local`: threads in this process (`--jobs N`); `ray`: one Ray task per job."""


@dataclass(frozen=True)
class ExecutorOptions:
    """Where a command's jobs run (`--executor`, `--jobs`, `--address`)."""

    executor: str = "local"
    """One of `EXECUTORS`."""
    jobs: int = 1
    """With `local`: jobs run at once (threads; each toolkit job borrows its own worker)."""
    address: str | None = None
    """With `ray`: the cluster to join; None starts a local one."""

    def __post_init__(self) -> None:
        # checked when the options are made, so a missing Ray stops the command before any work
        if self.executor == "ray" and importlib.util.find_spec("ray") is None:
            raise BackendUnavailable(
                "--executor ray needs Ray, which is not installed here: "
                "pip install 'rknn-baseline[ray]' (or use --executor local)"
            )


@dataclass(frozen=True)
class Task:
    """One independent job: `call(*args)`, where `call` is importable on every node."""

    name: str
    """Shown in progress lines and as the Ray task's name, e.g. `verify classifier rknn-sim/rk3588`."""
    call: Callable[..., Any]
    args: tuple[Any, ...]
    resources: dict[str, float] = field(default_factory=dict)
    """Ray custom resources the job needs: one unit per board platform it runs on."""
    owner: str = ""
    """Whose job this is, for errors about it (e.g. `model 'detector' (rknnlite on rk3588)`)."""


Done = Callable[[int, Any, float], None]
"""Called in the calling thread as each task finishes: (its index, its value, seconds it ran)."""


def run_tasks(tasks: list[Task], options: ExecutorOptions, done: Done | None = None) -> list[Any]:
    """Every task's value, in task order. The first error is raised once pending work is cancelled."""
    if not tasks:
        return []
    if options.executor == "ray":
        from baseline.executors.ray_executor import run_on_ray

        return [run.value for run in run_on_ray(tasks, options, done)]
    return run_in_threads(tasks, options.jobs, done)


def run_in_threads(tasks: list[Task], jobs: int, done: Done | None = None) -> list[Any]:
    """On an error in a job no other job starts, the jobs already running finish (each within
    its own time limit), and the error is raised: nothing of the run is left running (a library
    caller, say a test, goes on in the same process). On a signal (KeyboardInterrupt, SIGTERM)
    nothing is waited for: queued jobs are dropped and `baseline.children.cancel_all` ends the
    running ones."""
    values: list[Any] = [None] * len(tasks)
    failed = threading.Event()
    pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="baseline-job")
    # each future reports itself as it finishes: `wait(pending)` per finished task installed a
    # waiter on every pending one, quadratic (~2 s of CPU for the 1,000 jobs of a zoo's lock)
    finished: queue.SimpleQueue[tuple[int, Future[tuple[Any, float]]]] = queue.SimpleQueue()
    try:
        for i, task in enumerate(tasks):
            future = pool.submit(_timed, task, failed)
            future.add_done_callback(functools.partial(_report, finished, failed, i))
        for _ in tasks:
            index, future = finished.get()
            error = future.exception()
            if error is not None:
                raise error
            value, seconds = future.result()
            values[index] = value
            if done is not None:
                done(index, value, seconds)
    except Exception:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return values


class _NotStarted(Exception):
    """A job that did not start because another had failed."""


def _report(
    finished: queue.SimpleQueue[tuple[int, Future[tuple[Any, float]]]],
    failed: threading.Event,
    index: int,
    future: Future[tuple[Any, float]],
) -> None:
    # in the worker's thread, before it takes its next job: queued first, then the flag, so
    # that the failure reaches the caller before any job it stopped
    finished.put((index, future))
    if not future.cancelled() and future.exception() is not None:
        failed.set()


def _timed(task: Task, failed: threading.Event) -> tuple[Any, float]:
    if failed.is_set():
        raise _NotStarted(task.name)
    started = time.perf_counter()
    value = task.call(*task.args)
    return value, time.perf_counter() - started
