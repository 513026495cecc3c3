"""Where independent jobs run: threads in this process (the default) or Ray tasks.

`verify`, `lock` and `matrix` each cut their work into independent jobs and hand them here
as `Task`s: a module-level function and plain, picklable arguments. The same call runs in a
thread here or, unchanged, in a Ray worker on another host — which is what keeps local and
Ray results identical. Ray is imported only when chosen.
"""

from __future__ import annotations

import functools
import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from baseline.executors.base import EXECUTORS, Done, ExecutorOptions, Task


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
    nothing is waited for: queued jobs are dropped and `baseline.runtime.children.cancel_all` ends the
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


__all__ = ["EXECUTORS", "Done", "ExecutorOptions", "Task", "run_in_threads", "run_tasks"]
