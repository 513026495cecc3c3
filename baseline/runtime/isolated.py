"""Running untrusted ONNX graphs under a time limit, in a long-lived helper process.

onnx's shape inference and onnxruntime execute whatever the graph says: a Loop whose trip
count is 2**62 never returns, and a thread cannot be stopped. So `baseline check`, the static
gate and the onnxruntime golden run call `run_limited`, which sends the call to a helper
process (this module run as a script, same interpreter, same baseline) and kills the helper's
process group when the time limit passes. The helper is started once and reused, so a verify
pays the interpreter start and the onnx / onnxruntime import once per parallel job, not once
per call; a helper that was killed is replaced on the next call. For a cold verify the first
helper is forked from the CLI instead of started (`HelperPool.prestart`), and the CLI hints
at work it will soon ask for (`Helper.hint`: the first model's onnxruntime session), which
the helper starts as soon as the hint arrives, while it still imports.

Calls and values cross as pickles between baseline and its own child: both sides run the
same code, and nothing here unpickles data the project supplied.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import pickle
import queue
import select
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from baseline.errors import BaselineError
from baseline.runtime import children

START_TIMEOUT = 120.0
"""Seconds the helper may take to start (an interpreter and numpy, on a loaded CI machine)."""
SHARED = "baseline.backends.onnxrt"
"""What the helper imports that the verifying process needs too (numpy, baseline's models):
imported before a helper is forked (`HelperPool.prestart`), so that the copy has it already."""
PRELOAD = ("baseline.static_check.check", SHARED)
"""Imported by a new helper before it says it is ready (numpy, onnx, baseline's models: ~0.4 s
of CPU for a new interpreter; onnx alone, ~0.1 s, for a forked one), while verify does its own
start-up work (see `HelperPool.prestart`)."""
BUILD_SESSION = "baseline.runtime.sessions:build_in_background"
"""The hint (`HelperPool.hint`) that starts building a model's onnxruntime session, given the
model's confined path: sent before the first job that needs it (`baseline.launch`,
`baseline.verification.verify`)."""
WARM_UP = "baseline.static_check.check:warm_up"
"""Called by a new helper right after it says it is ready, before it reads the first call: what
the first calls load anyway (onnxruntime, the op tables), loaded while the caller may still be
busy with its own start-up. A call that arrives meanwhile waits in the pipe for no longer than
it would have spent loading them itself."""
_HEADER = struct.Struct("!Q")
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding `baseline/`
# `-c` puts the working directory first on sys.path: drop it, so that a project's own
# `baseline` package (or any module) cannot shadow ours in the helper
_BOOT = (
    "import sys; sys.path[:] = [{root!r}] + [p for p in sys.path if p not in ('', '.')]; "
    "from baseline.runtime.isolated import serve; serve(int(sys.argv[1]))"
)


class TimeLimitExceeded(BaselineError):
    """The call ran past its limit; the helper was killed."""


class HelperFailure(BaselineError):
    """The helper died (killed for memory, a native crash in onnxruntime)."""


def run_limited(
    call: Callable[..., Any] | str, args: tuple[Any, ...], limit: float, what: str, fix: str
) -> Any:
    """`call(*args)` in a helper process; `TimeLimitExceeded` after `limit` seconds. `call` may
    be named `"module:function"`, so that this process never imports what only the helper runs
    (onnx, onnxruntime: ~0.25 s).

    `what` names the work in errors (`model 'detector': onnxruntime`), `fix` says how to allow
    more time. Exceptions the call raises come back as themselves (a `BaselineError` stays
    one line)."""
    with HELPERS.borrow() as helper:
        try:
            return helper.call(call, args, limit, what)
        except TimeLimitExceeded as error:
            raise TimeLimitExceeded(
                f"{error} and was stopped (a Loop with a huge trip count?); {fix}"
            ) from None


_idle_work: list[Callable[[], object]] = []
_idle_guard = threading.Lock()


def while_waiting(work: Callable[[], object]) -> None:
    """Run `work` once, in this process, as soon as a call has sent its request and waits for
    the reply: idle time while the helper computes. For work this process will need later and
    can do early (imports a first computation triggers); if it fails, nothing is reported: the
    later step does the work again and reports what goes wrong."""
    with _idle_guard:
        _idle_work.append(work)


def _do_idle_work() -> None:
    with _idle_guard:
        pending = _idle_work[:]
        _idle_work.clear()
    for work in pending:
        with contextlib.suppress(Exception):
            work()


class Helper:
    """One helper process; `call` starts it when needed and kills it on a timeout."""

    def __init__(self) -> None:
        self._process: children.Child | None = None
        self._replies: int | None = None
        self._home: Path | None = None
        self._ready = False

    def call(self, call: Callable[..., Any] | str, args: tuple[Any, ...], limit: float, what: str) -> Any:
        self._start()
        assert self._process is not None and self._process.stdin is not None
        try:
            self._write(call, args, reply=True)
        except BrokenPipeError:
            self._fail(HelperFailure(f"{what}: the helper process exited before the request"))
        _do_idle_work()
        kind, value = pickle.loads(self._read(limit, what))
        if isinstance(value, MemoryError):  # the helper's, not ours: a result, not a crash
            raise HelperFailure(f"{what} ran out of memory (is the file what it claims to be?)")
        if kind == "error":
            raise value
        return value

    def hint(self, call: str, args: tuple[Any, ...]) -> None:
        """Send `call(*args)` to a running helper without waiting: it runs as soon as it is
        read, even while the helper still imports (see `serve`), and answers nothing. For
        work a later call will want done (building a session): if it fails, or the helper
        has not started, the later call does the work itself and reports what went wrong."""
        if self._process is None or self._process.poll() is not None:
            return
        with contextlib.suppress(OSError):  # a helper that died is replaced by the next call
            self._write(call, args, reply=False)

    def _write(self, call: Callable[..., Any] | str, args: tuple[Any, ...], reply: bool) -> None:
        assert self._process is not None and self._process.stdin is not None
        module, name = call.split(":") if isinstance(call, str) else (call.__module__, call.__qualname__)
        request = pickle.dumps((module, name, args, reply))
        self._process.stdin.write(_HEADER.pack(len(request)) + request)
        self._process.stdin.flush()

    def exited(self) -> bool:
        return self._process is not None and self._process.poll() is not None

    def end_soon(self) -> None:
        """Kill the process without waiting for it; `close` reaps it."""
        if self._process is not None:
            children.kill_later(self._process)

    def close(self) -> None:
        if self._process is not None:
            children.kill(self._process)
            if self._process.stdin is not None:
                with contextlib.suppress(OSError):  # the helper is gone: nothing left to flush
                    self._process.stdin.close()
        if self._replies is not None:
            os.close(self._replies)
        if self._home is not None:
            children.remove(self._home)
        self._process, self._replies, self._home, self._ready = None, None, None, False

    def _start(self) -> None:
        self.prestart()
        if not self._ready:
            self._read(START_TIMEOUT, "the ONNX helper process")
            self._ready = True

    def prestart(self, fork: bool = False) -> None:
        """Launch the process unless it runs; its start-up overlaps with the caller's work.
        `fork`: copy this process instead of starting an interpreter (see `HelperPool.prestart`)."""
        if self._process is not None and self._process.poll() is None:
            return
        self.close()
        self._home = children.scratch_dir("baseline-helper-")
        read_fd, write_fd = os.pipe()
        try:
            if fork and children.safe_to_fork():  # else a new interpreter: see `safe_to_fork`
                path = _helper_import_path(os.getcwd())
                self._process = children.fork(lambda: _serve_copy(write_fd, path), (write_fd,), self._home)
            else:
                self._process = children.spawn(
                    [sys.executable, "-c", _BOOT.format(root=str(_PACKAGE_ROOT)), str(write_fd)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,  # onnxruntime's own prints must not reach our output
                    stderr=subprocess.DEVNULL,
                    pass_fds=(write_fd,),
                    cwd=self._home,
                )
        finally:
            os.close(write_fd)
        self._replies = read_fd

    def forked_and_running(self) -> bool:
        """A copy of this process (`fork`), still running: what may be handed to a worker
        (the worker watches it through /proc, see `children.adopt`)."""
        return isinstance(self._process, children.Forked) and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        """The helper process's id while it runs."""
        running = self._process is not None and self._process.poll() is None
        return self._process.pid if running and self._process is not None else None

    def descriptors(self) -> tuple[int, ...]:
        """The pipes this process talks to the helper through: what a forked worker keeps
        open to take the helper over (`HelperPool.hand_over`)."""
        if self._process is None or self._process.stdin is None or self._replies is None:
            return ()
        return (self._process.stdin.fileno(), self._replies)

    def let_go(self) -> None:
        """In the process that handed this helper to a forked worker: close our ends of its
        pipes, and nothing else. The worker talks to it and ends it; the process stays our
        child (`children` reaps it at exit, and kills it if we are stopped)."""
        if self._process is not None and self._process.stdin is not None:
            with contextlib.suppress(OSError):
                self._process.stdin.close()
        if self._replies is not None:
            os.close(self._replies)
        self._process, self._replies, self._home, self._ready = None, None, None, False

    def take_over(self) -> None:
        """In the forked worker that was handed this helper: it is ours to end, with its scratch."""
        if isinstance(self._process, children.Forked):
            children.adopt(self._process, self._home)

    def _read(self, limit: float, what: str) -> bytearray:
        """One framed reply, or the helper killed after `limit` seconds."""
        deadline = time.monotonic() + limit
        header = self._read_exactly(_HEADER.size, deadline, limit, what)
        return self._read_exactly(_HEADER.unpack(header)[0], deadline, limit, what)

    def _read_exactly(self, size: int, deadline: float, limit: float, what: str) -> bytearray:
        assert self._replies is not None
        # into one buffer: joining chunks (`data += chunk`) copied everything read so far for
        # each 64 KB the pipe holds, quadratic in the reply (a 100 MB output: ~80 GB copied)
        data = bytearray(size)
        view = memoryview(data)
        received = 0
        while received < size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._fail(TimeLimitExceeded(f"{what} did not finish within {limit:g} s"))
            readable, _, _ = select.select([self._replies], [], [], remaining)
            if not readable:
                continue
            count = os.readv(self._replies, [view[received:]])
            if not count:
                self._fail(HelperFailure(f"{what}: {self._death()}"))
            received += count
        view.release()
        return data

    def _death(self) -> str:
        assert self._process is not None
        code = self._process.wait()
        if children.cancelled():
            return "stopped (baseline is shutting down)"
        if code < 0:
            return f"the helper process was killed by signal {-code} (out of memory, or a native crash)"
        return f"the helper process exited with code {code}"

    def _fail(self, error: BaselineError) -> None:
        self.close()
        raise error


class HelperPool:
    """Idle helpers lent to one job at a time, so that parallel jobs never queue on one."""

    def __init__(self) -> None:
        self._idle: list[Helper] = []
        self._all: list[Helper] = []
        self._ended: list[Helper] = []  # killed by `end_idle`, not yet reaped
        self._guard = threading.Lock()
        atexit.register(self.close)

    @contextlib.contextmanager
    def borrow(self) -> Iterator[Helper]:
        with self._guard:
            helper = self._idle.pop() if self._idle else self._new()
        try:
            yield helper
        finally:
            with self._guard:
                self._idle.append(helper)

    def prestart(self, fork: bool = False) -> None:
        """Start one helper now, in the background, for a run that will need it.

        `fork` (Linux; `baseline.launch` for a cold verify, before any thread runs): the helper
        is a copy of this process, which has imported what both need (numpy, pydantic,
        baseline's models: `SHARED`): measured ~0.25 s of CPU less than a new interpreter that
        imports them again, and the helper is ready ~0.2 s sooner."""
        with self._guard:
            helper = self._idle[0] if self._idle else None
            if helper is None:
                helper = self._new()
                self._idle.append(helper)
            helper.prestart(fork)  # under the guard: a job may borrow this helper at once

    def prestart_spare(self) -> None:
        """One more helper, forked now (`baseline.launch`, before any thread runs) for a
        `verify --jobs N` whose jobs may run on forked workers: a worker forked later is handed
        it (`hand_over`), so that its onnx / onnxruntime imports ran while this process was
        still reading the lock, instead of after the worker started (measured ~0.3 s of CPU).
        Kept first in the idle list: jobs here borrow the last, the one `hint` talks to."""
        with self._guard:
            helper = self._new()
            self._idle.insert(0, helper)
            helper.prestart(fork=True)

    def hand_over(self) -> Helper | None:
        """A running idle helper this process does not need, if it has more than one, for a
        worker about to be forked (it keeps `Helper.descriptors` open, and calls `adopt`).
        The caller then lets it go (`Helper.let_go`)."""
        with self._guard:
            spare = next((h for h in self._idle[:-1] if h.forked_and_running()), None)
            if spare is not None:
                self._idle.remove(spare)
                self._all.remove(spare)
            return spare

    def adopt(self, helper: Helper | None) -> None:
        """In a forked worker, after `forget_inherited`: the helper the parent handed over
        becomes this process's, the one its jobs borrow."""
        if helper is None:
            return
        helper.take_over()
        with self._guard:
            self._all.append(helper)
            self._idle.append(helper)

    def pids(self) -> list[int]:
        """The process ids of this process's running helpers."""
        with self._guard:
            return [pid for helper in self._all if (pid := helper.pid) is not None]

    def hint(self, call: str, args: tuple[Any, ...]) -> None:
        """`Helper.hint` to the helper the next job will borrow, if one is already running
        (started by `prestart`); nothing is started for a hint."""
        with self._guard:
            if self._idle:
                self._idle[-1].hint(call, args)

    def end_idle(self) -> None:
        """Kill the idle helpers without waiting, for a process that is about to end: a helper
        that held a large model takes the kernel ~0.05-0.1 s to tear down, which now overlaps
        the caller's last work (the report) instead of following it. They are reaped by
        `close` at exit; a later call gets a new helper."""
        with self._guard:
            ending, self._idle = self._idle, []
            self._ended += ending
        for helper in ending:
            helper.end_soon()

    def forget_inherited(self) -> None:
        """In a forked copy: the parent's helpers are not ours (their pipes were closed by the
        fork, see `children.fork`); the copy starts its own. The objects are kept alive, as
        `children.forget_inherited` keeps the processes."""
        with self._guard:
            children.keep_alive(list(self._all))
            self._idle, self._all, self._ended = [], [], []

    def _new(self) -> Helper:
        # helpers ended by `end_idle` (a process running many commands: the CLI's tests) are
        # reaped here rather than piling up until exit
        for ended in [h for h in self._ended if h.exited()]:
            ended.close()
            self._ended.remove(ended)
            self._all.remove(ended)
        helper = Helper()
        self._all.append(helper)
        return helper

    def close(self) -> None:
        with self._guard:
            helpers = list(self._all)
        for helper in helpers:
            helper.close()


HELPERS = HelperPool()


# --- the helper's side ---


def serve(reply_fd: int) -> None:
    """Answer framed pickled calls from stdin on `reply_fd`, in order, until stdin closes."""
    calls: queue.SimpleQueue[tuple[str, str, tuple[Any, ...]] | None] = queue.SimpleQueue()
    # descriptor 0 itself, not `sys.stdin`: a helper forked from a process whose `sys.stdin` was
    # replaced (pytest's capture; a worker of `baseline.executors.processes`) read end-of-file
    requests = open(0, "rb", closefd=False)  # noqa: SIM115 - read until the helper ends
    threading.Thread(target=_receive, args=(requests, calls), daemon=True).start()
    for module in PRELOAD:
        importlib.import_module(module)
    _send(reply_fd, ("ready", None))
    with contextlib.suppress(Exception):  # a call that needs what failed to load reports it
        _resolve(*WARM_UP.split(":"))()
    while (call := calls.get()) is not None:
        module, name, args = call
        try:
            reply: tuple[str, Any] = ("ok", _resolve(module, name)(*args))
        except Exception as error:
            reply = ("error", error)
        _send(reply_fd, reply)


def _helper_import_path(cwd: str) -> list[str]:
    """This process's import path without the working directory (`python -m` and `-c` put it
    first): what a forked helper imports (onnx, onnxruntime) must not come from the project,
    as `_BOOT` ensures for a new interpreter."""
    return [str(_PACKAGE_ROOT)] + [p for p in sys.path if p not in ("", ".", cwd)]


def _serve_copy(reply_fd: int, import_path: list[str]) -> None:
    """`serve` in a forked copy of the CLI."""
    sys.path[:] = import_path
    serve(reply_fd)


def _receive(stdin: BinaryIO, calls: queue.SimpleQueue[tuple[str, str, tuple[Any, ...]] | None]) -> None:
    """Read requests as they arrive: calls are queued for `serve`, hints run here at once, so
    that one sent while the helper still imports starts then (they only start work, on
    threads of their own). None in the queue: stdin closed."""
    try:
        while len(header := stdin.read(_HEADER.size)) == _HEADER.size:
            module, name, args, reply = pickle.loads(stdin.read(_HEADER.unpack(header)[0]))
            if reply:
                calls.put((module, name, args))
                continue
            with contextlib.suppress(Exception):  # the later call does the work itself, and reports
                _resolve(module, name)(*args)
    finally:
        calls.put(None)


def _resolve(module: str, name: str) -> Callable[..., Any]:
    target: Any = importlib.import_module(module)
    for part in name.split("."):
        target = getattr(target, part)
    return target  # type: ignore[no-any-return]


def _send(fd: int, reply: tuple[str, Any]) -> None:
    try:
        data = pickle.dumps(reply)
        if reply[0] == "error":
            pickle.loads(data)  # exceptions with their own __init__ pickle but do not unpickle
    except Exception:
        error = reply[1]
        data = pickle.dumps(("error", RuntimeError(f"{type(error).__name__}: {error}")))
    # through a view: slicing `bytes` after each write copied the rest, quadratic in the reply
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]
