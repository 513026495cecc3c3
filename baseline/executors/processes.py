"""`--jobs N` on forked worker processes: for many small jobs, where threads do not scale.

A small model's job is a few milliseconds of Python and numpy in the calling process (gate
judging, result records, its cache entry) around a call to the ONNX helper. Threads share one
interpreter lock for that part, so `verify --jobs 2` of a 1,000-model zoo ran barely faster
than one job (1.09×). Here the caller forks N - 1 workers once, after everything the jobs need
is imported and the jobs are planned and keyed (a worker gets the tasks as a copy of memory:
nothing is pickled on the way out), and feeds them groups of task indices (one model's jobs,
which share the helper's session). Each worker runs its groups one job after the other with
an ONNX helper of its own and sends back each value as it finishes. The caller is the N-th:
it runs groups itself with its own helper (the one `baseline.launch` forked before the CLI's
imports) and, between them, merges the workers' replies: `done` runs in its thread, as with
threads.

Used only where it is safe (see `can_use`): Linux, and the calling thread the process's only
one, native threads included (a fork copies one thread, and a lock another held stays held in
the copy: a worker forked from a test process that had run onnxruntime, whose pool `threading`
does not list, hung in a futex wait); jobs that borrow no toolkit worker or board. Elsewhere
`--jobs N` runs on threads, as before. Stopping: a signal in the caller ends every worker, and
each worker ends its helper and removes its scratch before it exits; a worker whose caller died
reads end-of-file once its groups are done and exits.
"""

from __future__ import annotations

import collections
import contextlib
import os
import pickle
import select
import signal
import struct
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from baseline.errors import BaselineError
from baseline.executors.base import Done, Task
from baseline.runtime import children

if TYPE_CHECKING:
    from baseline.runtime.isolated import Helper

QUEUED = 3
"""Groups handed to a worker ahead of the one it runs: it never waits between groups while the
caller runs one of its own, and at the end no worker holds much that another could have run."""
STOP_GRACE = 5.0
"""Seconds a worker has to end its helpers after SIGTERM before it is killed outright."""
_HEADER = struct.Struct("!Q")


class WorkerDied(BaselineError):
    """A worker process ended with jobs unanswered (killed for memory, a native crash)."""


def can_use(workers: int) -> bool:
    """Whether `run_in_processes` may fork here: Linux, and this thread the process's only one,
    native threads included (`children.safe_to_fork`)."""
    return workers > 1 and children.safe_to_fork()


def run_in_processes(
    tasks: list[Task], groups: list[list[int]], workers: int, done: Done | None = None
) -> list[Any]:
    """Every task's value, in task order, from `workers` processes: this one and `workers - 1`
    forked copies. `groups` (indices into `tasks`, each index once) are handed out in their
    order, each to one process; this one runs the first (the group whose session the caller
    may have hinted to its ONNX helper) and takes another whenever it has merged what the
    workers sent. The first error a job raises is raised here once every process has finished
    what it was handed (no further group is handed out)."""
    values: list[Any] = [None] * len(tasks)
    if not groups:
        return values
    scratch = children.scratch_dir("baseline-worker-")
    pool: list[_Worker] = []
    try:
        for number in range(min(workers, len(groups)) - 1):  # all forked before a job runs here
            pool.append(_Worker.start(tasks, scratch / str(number)))
        with _cpu_shares(pool):
            _Serving(tasks, pool, groups, values, done).serve()
    except BaseException:
        _stop(pool)
        raise
    finally:
        for worker in pool:
            worker.close()
        children.remove(scratch)
    return values


@contextlib.contextmanager
def _cpu_shares(pool: list[_Worker]) -> Iterator[None]:
    """Each job process and its ONNX helper on a share of the CPUs this process may use, the
    shares disjoint (on 2 cores: this process and its helper on one, the worker and its helper
    on the other); this process and its helpers get every CPU back at the end. A job is a
    ping-pong between a process and its helper: left to the scheduler, a woken helper often
    queued behind the other pair on its core while its own core went idle (run-queue waits of
    ~2 s in a 1,000-model zoo's 4 s verify). That zoo's cold `verify --jobs 2`, with and
    without shares, interleaved: 4.64 against 5.98 s, 6.37 against 7.20 s of CPU (7 pairs, the
    machine shared at load 4.2-4.6; `bench/results/jobs_pin_s20.json`). Not done where the CPUs
    are no more than the processes, or the platform has no affinity."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if not pool or len(allowed) <= len(pool):
        yield
        return
    from baseline.runtime.isolated import HELPERS

    shares = [set(allowed[index :: len(pool) + 1]) for index in range(len(pool) + 1)]
    mine = [0, *HELPERS.pids()]
    _pin(mine, shares[0])
    for worker, share in zip(pool, shares[1:], strict=True):
        _pin(worker.pids, share)
    try:
        yield
    finally:
        _pin(mine, set(allowed))


def _pin(pids: list[int], cpus: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):  # a process that already ended
            os.sched_setaffinity(pid, cpus)


class _Serving:
    """The calling process's loop: merge the workers' replies, feed them, run groups itself."""

    def __init__(
        self,
        tasks: list[Task],
        pool: list[_Worker],
        groups: list[list[int]],
        values: list[Any],
        done: Done | None,
    ) -> None:
        self.tasks, self.pool, self.values, self.done = tasks, pool, values, done
        self.pending = collections.deque(groups)
        self.error: BaseException | None = None

    def serve(self) -> None:
        own = self.pending.popleft()
        for _ in range(QUEUED):  # one group each in turn: a short run is shared too
            for worker in self.pool:
                worker.feed(self.pending, 1)
        self._run(own)
        while self._merge(wait=not self.pending) or self.pending:
            if self.pending:
                self._run(self.pending.popleft())
        if self.error is not None:
            raise self.error

    def _merge(self, wait: bool) -> bool:
        """Every reply the workers have sent, then feed them; `wait` for one if none is there.
        False once no worker holds a job. (Merging one reply per group this process ran left a
        worker without groups: it ran a quarter of a zoo's jobs instead of half.)"""
        while busy := {worker.replies: worker for worker in self.pool if worker.waiting}:
            readable, _, _ = select.select(list(busy), [], [], None if wait else 0)
            if not readable:
                return True
            for fd in readable:
                self._receive(busy[fd])
            wait = False
        return False

    def _run(self, group: list[int]) -> None:
        if not self.pending:
            for worker in self.pool:
                worker.end_input()
        for index in group:
            task = self.tasks[index]
            started = time.perf_counter()
            try:
                value = task.call(*task.args)
            except Exception as error:
                self._failed(error)
                return
            self._answer(index, value, time.perf_counter() - started)

    def _receive(self, worker: _Worker) -> None:
        reply = worker.receive(expect_end=self.error is not None)
        if reply is None:  # a worker that stopped at its own error: the rest was not run
            return
        if reply[0] == "error":
            self._failed(reply[2])
            return
        _, index, value, seconds = reply
        self._answer(index, value, seconds)
        worker.feed(self.pending)

    def _answer(self, index: int, value: Any, seconds: float) -> None:
        self.values[index] = value
        if self.done is not None and self.error is None:
            self.done(index, value, seconds)

    def _failed(self, error: BaseException) -> None:
        self.error = self.error or error
        self.pending.clear()  # no further group starts; what was handed out finishes
        for worker in self.pool:
            worker.end_input()


def _stop(pool: list[_Worker]) -> None:
    """SIGTERM every worker (it ends its helpers and exits), then wait: killed after `STOP_GRACE`."""
    for worker in pool:
        worker.signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE
    for worker in pool:
        while worker.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        children.kill(worker.process)


class _Worker:
    """One forked worker: its input (groups of indices) and its replies (one per job)."""

    def __init__(self, process: children.Forked, replies: int, helper: int | None = None) -> None:
        self.process, self.replies = process, replies
        self.pids = [process.pid] + ([helper] if helper is not None else [])
        """The worker and the helper it was handed. A helper the worker forks itself (no spare was
        started: a verify the cache was expected to answer) inherits the worker's CPUs if it is
        forked after they are set, else runs unpinned: a lost gain, not an error."""
        self.handed: collections.deque[set[int]] = collections.deque()  # groups not yet answered
        self.waiting = 0  # jobs handed out, not answered
        self._open = True

    @classmethod
    def start(cls, tasks: list[Task], home: Path) -> _Worker:
        """Fork a worker; it takes over a spare ONNX helper if this process has one (forked by
        `baseline.launch`, its imports done by now), else forks its own."""
        from baseline.runtime.isolated import HELPERS

        home.mkdir()
        helper = HELPERS.hand_over()
        keep = helper.descriptors() if helper is not None else ()
        helper_pid = helper.pid if helper is not None else None
        read_fd, write_fd = os.pipe()
        try:
            process = children.fork(lambda: _work(tasks, write_fd, home, helper), (write_fd, *keep), home)
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
            if helper is not None:
                helper.let_go()
        return cls(process, read_fd, helper_pid)

    def feed(self, pending: collections.deque[list[int]], most: int = QUEUED) -> None:
        """Hand out groups until the worker holds `QUEUED` (at most `most` now)."""
        while self._open and pending and len(self.handed) < QUEUED and most > 0:
            most -= 1
            group = pending.popleft()
            self.handed.append(set(group))
            self.waiting += len(group)
            try:
                assert self.process.stdin is not None
                self.process.stdin.write(_frame(group))
                self.process.stdin.flush()
            except BrokenPipeError:  # it ended (at a job's error, or died): its replies say which
                self.end_input()
                return
        if not pending:
            self.end_input()

    def receive(self, expect_end: bool) -> tuple[Any, ...] | None:
        """The next reply; None if the worker ended and `expect_end` (a job failed)."""
        data = _read_frame(self.replies)
        if data is None:
            if expect_end:
                self.waiting = 0
                return None
            code = self.process.wait()
            raise WorkerDied(
                f"a verify worker process ended with {self.waiting} job(s) unanswered "
                f"(exit code {code}: out of memory, or a native crash?); rerun with --jobs 1 to see which"
            )
        reply: tuple[Any, ...] = pickle.loads(data)
        self.waiting -= 1
        self.handed[0].discard(reply[1])
        if not self.handed[0]:
            self.handed.popleft()
        return reply

    def end_input(self) -> None:
        """No more groups: the worker exits once it has answered what it holds."""
        if self._open and self.process.stdin is not None:
            self._open = False
            with contextlib.suppress(OSError):  # a broken pipe: what was buffered is dropped
                self.process.stdin.close()

    def signal(self, signum: int) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.process.pid, signum)

    def close(self) -> None:
        self.end_input()
        self.process.wait()
        children.forget(self.process)
        with contextlib.suppress(OSError):
            os.close(self.replies)


# --- the worker's side ---


class _Stopped(BaseException):
    """SIGTERM in a worker: unwind, ending its helpers on the way."""


def _raise_stopped(signum: int, frame: object) -> NoReturn:
    raise _Stopped


def _work(tasks: list[Task], replies: int, home: Path, helper: Helper | None) -> None:
    """Run the groups read from standard input; reply per job. Ends its own children (the ONNX
    helper: `helper` handed over by the caller, or one it forks) before it returns, however it
    ends."""
    signal.signal(signal.SIGTERM, _raise_stopped)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller decides; it sends SIGTERM
    from baseline.runtime.isolated import HELPERS

    children.forget_inherited()
    HELPERS.forget_inherited()
    HELPERS.adopt(helper)
    tempfile.tempdir = str(home)  # the helpers' scratch lands in the caller's folder
    # without one handed over: a copy of this process, which has imported what the helper needs
    # but onnx and onnxruntime (a new interpreter took ~1 s more to be ready on a busy machine)
    HELPERS.prestart(fork=True)
    try:
        while (data := _read_frame(0)) is not None:
            for index in pickle.loads(data):
                if not _run_one(tasks, index, replies):
                    return
    finally:
        children.cancel_all()


def _run_one(tasks: list[Task], index: int, replies: int) -> bool:
    task = tasks[index]
    started = time.perf_counter()
    try:
        value = task.call(*task.args)
    except Exception as error:
        _send(replies, ("error", index, _picklable(error)))
        return False
    _send(replies, ("ok", index, value, time.perf_counter() - started))
    return True


def _picklable(error: Exception) -> Exception:
    """The error itself if it survives the trip (a `BaselineError` stays one line), or its text."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")
    return error


def _frame(value: object) -> bytes:
    data = pickle.dumps(value)
    return _HEADER.pack(len(data)) + data


def _send(fd: int, reply: tuple[Any, ...]) -> None:
    view = memoryview(_frame(reply))
    while view:
        view = view[os.write(fd, view) :]


def _read_frame(fd: int) -> bytearray | None:
    """One framed message, or None at end of file."""
    header = _read_exactly(fd, _HEADER.size)
    return None if header is None else _read_exactly(fd, _HEADER.unpack(header)[0])


def _read_exactly(fd: int, size: int) -> bytearray | None:
    data = bytearray(size)
    view = memoryview(data)
    received = 0
    while received < size:
        count = os.readv(fd, [view[received:]])
        if not count:
            return None
        received += count
    view.release()
    return data
