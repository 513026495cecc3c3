"""Every child process and scratch folder baseline makes, so that one call can end them all.

Toolkit workers and the ONNX helper run in their own sessions (a native crash or a hang must
not take baseline down, and a terminal's Ctrl-C must not reach them half-way through a
request), which also means no signal reaches them when baseline itself is stopped. They are
started through `spawn` and their scratch folders made with `scratch_dir`, and `cancel_all`
(called on SIGINT / SIGTERM, see `baseline.cli.main`) kills every process group and removes
every folder. After it, `spawn` refuses: a job thread that was mid-run must not start a
fresh worker for its next gate while the process shuts down.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import gc
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

from baseline.errors import BaselineError

_guard = threading.RLock()
_processes: set[Child] = set()
_folders: set[Path] = set()
_cancelled = threading.Event()


class Cancelled(BaselineError):
    """The run is being stopped (a signal): no new child processes."""


BLAS_THREADS = "OPENBLAS_NUM_THREADS"
_blas_limit_is_ours = False


def limit_blas_threads() -> None:
    """One OpenBLAS thread for numpy in this process (called before numpy loads), unless the
    user chose a number: for a cold verify (`baseline.launch`). baseline multiplies no matrices
    (see `baseline.compare.dot`), but OpenBLAS starts a thread per core when numpy loads and
    spins them for ~0.1 s: CPU taken from the ONNX helper building its session on the other
    core (a 54 MB CNN: 0.85 -> 0.78 s of CPU). Processes `spawn` starts (toolkit workers, a
    team's code) get the user's setting back; forked helpers are copies of this process."""
    global _blas_limit_is_ours
    if BLAS_THREADS not in os.environ:
        os.environ[BLAS_THREADS] = "1"
        _blas_limit_is_ours = True


def spawn(command: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """`subprocess.Popen` in a new session, remembered until `forget` or `cancel_all`."""
    if _blas_limit_is_ours:
        env = dict(os.environ if kwargs.get("env") is None else kwargs["env"])
        env.pop(BLAS_THREADS, None)
        kwargs["env"] = env
    with _guard:
        if _cancelled.is_set():
            raise Cancelled("baseline is stopping: no new worker is started")
        process: subprocess.Popen[bytes] = subprocess.Popen(command, start_new_session=True, **kwargs)
        _processes.add(process)
    return process


class Forked:
    """A child made by `fork` (a copy of this process, no exec), with the part of
    `subprocess.Popen`'s interface baseline uses, as safe between threads: one thread
    reaps it, `poll` never blocks behind a thread that waits."""

    def __init__(self, pid: int, stdin: BinaryIO) -> None:
        self.pid, self.stdin = pid, stdin
        self.returncode: int | None = None
        self.adopted = False  # another process's child, handed to this one (`adopt`)
        self._reaping = threading.Lock()

    def poll(self) -> int | None:
        if self.returncode is None and self._reaping.acquire(blocking=False):
            try:
                self._reap(os.WNOHANG)
            finally:
                self._reaping.release()
        return self.returncode

    def wait(self) -> int:
        with self._reaping:
            self._reap(0)
            while self.returncode is None:  # adopted: not ours to wait for, only to watch
                time.sleep(0.005)
                self._reap(os.WNOHANG)
        return self.returncode

    def _reap(self, flags: int) -> None:
        if self.returncode is not None:
            return
        try:
            pid, status = os.waitpid(self.pid, flags)
        except ChildProcessError:
            # adopted: its parent reaps it; it ran until it is gone or a zombie (status unknown).
            # Otherwise reaped by someone else: gone, its status lost (as Popen says 0)
            if not (self.adopted and _running(self.pid)):
                self.returncode = 0
            return
        if pid:
            self.returncode = os.waitstatus_to_exitcode(status)


Child = subprocess.Popen[bytes] | Forked


def _running(pid: int) -> bool:
    """Whether `pid` runs: neither gone nor a zombie waiting for its parent to reap it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def can_fork() -> bool:
    """Linux only: elsewhere a copy of a process that loaded system frameworks may hang."""
    return sys.platform == "linux" and hasattr(os, "fork")


def safe_to_fork() -> bool:
    """Whether a copy of this process can take any lock it needs: Linux, and this thread the
    process's only one, native threads included (/proc/self/task). A fork copies only the
    calling thread; a lock another thread held at that moment stays held in the copy for ever.
    `threading` alone does not see native pools (OpenBLAS's, onnxruntime's): a worker forked
    from a test process that had run onnxruntime hung in a futex wait. Unknown: not safe."""
    if not can_fork() or threading.active_count() != 1:
        return False
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def fork(run: Callable[[], object], keep: tuple[int, ...], cwd: Path) -> Forked:
    """`run()` in a copy of this process, in a new session (as `spawn`): standard input from
    a pipe the returned object writes to, output and errors to /dev/null, every other
    descriptor closed but `keep`. The copy shares what this process imported, so it starts
    with no interpreter start-up and no imports of its own; it ends when `run` returns and
    never runs this process's exit handlers. Call it only when `safe_to_fork()`."""
    with _guard:
        if _cancelled.is_set():
            raise Cancelled("baseline is stopping: no new worker is started")
        stdin_read, stdin_write = os.pipe()
        for stream in (sys.stdout, sys.stderr):  # nothing buffered here may be written twice
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        with warnings.catch_warnings():
            # Python 3.12+ warns when the process has other threads: numpy's OpenBLAS pool,
            # which stops itself around a fork (pthread_atfork); the warning turned into an
            # error (-W error) would leave a child nobody tracks
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # pragma: no cover - the child; its work is tested through `run`
            _become_child(run, stdin_read, keep, cwd)
        os.close(stdin_read)
        process = Forked(pid, os.fdopen(stdin_write, "wb"))
        _processes.add(process)
    return process


def _become_child(run: Callable[[], object], stdin: int, keep: tuple[int, ...], cwd: Path) -> NoReturn:
    status = 1
    try:
        # the collector would walk every object this copy shares with its parent, and so make
        # the kernel copy their pages; what was made before the fork stays as it is
        gc.freeze()
        os.setsid()
        os.dup2(stdin, 0)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        _close_all_but(keep)
        os.chdir(cwd)
        run()
        status = 0
    finally:
        os._exit(status)


def _close_all_but(keep: tuple[int, ...]) -> None:
    limit = os.sysconf("SC_OPEN_MAX")
    start = 3
    for fd in sorted(keep):
        os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, limit)


def kill(process: Child) -> None:
    """Kill the process's whole group (the toolkit starts helpers of its own) and reap it."""
    if process.poll() is None:
        kill_later(process)
        process.wait()
    forget(process)


def kill_later(process: Child) -> None:
    """SIGKILL the process's whole group without waiting: the kernel frees its memory while
    the caller goes on, and `kill` (or `cancel_all` at exit) reaps it."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            # no group of that id yet: a copy made by `fork` and killed before its `setsid` is
            # still in our group, with no children of its own; `kill` then waited for ever
            # for a process that went on to run
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
        except PermissionError:
            pass


def end_group(process: Child) -> None:
    """After `process` ended: SIGKILL what it left running in its group (a pool the team's code
    started and never closed outlived every verify), then forget it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    forget(process)


def forget(process: Child) -> None:
    with _guard:
        _processes.discard(process)


def scratch_dir(prefix: str, parent: Path | None = None) -> Path:
    """A fresh private temporary folder, removed by `remove` or `cancel_all`. Its name carries
    this process's id, so that a later run can remove it if this one is killed (`remove_orphans`)."""
    if parent is None:
        _remove_orphans_once()
    path = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent))
    with _guard:
        _folders.add(path)
    return path


ORPHAN = re.compile(r"baseline-(?:worker|helper|rknn)-(\d+)-")
"""Scratch folders of baseline's own processes: `kill -9` leaves them behind (they piled up)."""


def remove_orphans(folder: Path | None = None) -> list[Path]:
    """Remove this user's scratch folders whose process is gone; return what was removed."""
    folder = Path(folder or tempfile.gettempdir())
    removed = []
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            match = ORPHAN.match(entry.name)
            if match is None or int(match[1]) == os.getpid() or _alive(int(match[1])):
                continue
            with contextlib.suppress(OSError):
                if entry.is_dir() and not entry.is_symlink() and entry.stat().st_uid == os.getuid():
                    shutil.rmtree(entry, ignore_errors=True)
                    removed.append(entry)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


@functools.cache
def _remove_orphans_once() -> None:
    remove_orphans()


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    with _guard:
        _folders.discard(path)


def cancel_all() -> None:
    """Stop for good: refuse new children, kill every live one, remove every scratch folder."""
    _cancelled.set()
    with _guard:
        processes, folders = list(_processes), list(_folders)
    for process in processes:
        # one child that cannot be reaped must not leave the others running
        with contextlib.suppress(OSError):
            kill(process)
    for folder in folders:
        remove(folder)


@atexit.register
def _at_exit() -> None:
    """Whatever is still registered when baseline exits (a worker never closed) goes too."""
    cancel_all()


def resume() -> None:
    """Allow new children again: a new command starts in this process (the CLI's tests run
    many commands in one process, and one of them may have been interrupted)."""
    _cancelled.clear()


_inherited: list[object] = []
"""What a forked copy inherited from its parent, kept alive: a pipe's file object, collected,
would close its descriptor number, which by then may be one of the copy's own."""


def forget_inherited() -> None:
    """In a forked copy (`baseline.executors.processes`): the parent's children and scratch
    folders are not this process's to end or remove; its own start from none."""
    with _guard:
        keep_alive([*_processes, *_folders])
        _processes.clear()
        _folders.clear()
    _cancelled.clear()


def adopt(process: Forked, folder: Path | None) -> None:
    """In a forked copy: a child of the parent's (a helper it handed over) and its scratch
    folder are this process's to end and remove (`cancel_all`). It cannot reap it (it is its
    parent's child): it watches it instead (`Forked.adopted`)."""
    process.adopted = True
    with _guard:
        _processes.add(process)
        if folder is not None:
            _folders.add(folder)


def keep_alive(inherited: list[Any]) -> None:
    """Hold on to objects a forked copy inherited and must neither use nor collect."""
    _inherited.extend(inherited)


def cancelled() -> bool:
    return _cancelled.is_set()


def live_pids() -> list[int]:
    """The children running now (for tests and diagnostics)."""
    with _guard:
        return sorted(p.pid for p in _processes if p.poll() is None)
