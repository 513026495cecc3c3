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
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from baseline.errors import BaselineError

_guard = threading.RLock()
_processes: set[subprocess.Popen[bytes]] = set()
_folders: set[Path] = set()
_cancelled = threading.Event()


class Cancelled(BaselineError):
    """The run is being stopped (a signal): no new child processes."""


def spawn(command: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """`subprocess.Popen` in a new session, remembered until `forget` or `cancel_all`."""
    with _guard:
        if _cancelled.is_set():
            raise Cancelled("baseline is stopping: no new worker is started")
        process: subprocess.Popen[bytes] = subprocess.Popen(command, start_new_session=True, **kwargs)
        _processes.add(process)
    return process


def kill(process: subprocess.Popen[bytes]) -> None:
    """Kill the process's whole group (the toolkit starts helpers of its own) and reap it."""
    if process.poll() is None:
        kill_later(process)
        process.wait()
    forget(process)


def kill_later(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process's whole group without waiting: the kernel frees its memory while
    the caller goes on, and `kill` (or `cancel_all` at exit) reaps it."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)


def forget(process: subprocess.Popen[bytes]) -> None:
    with _guard:
        _processes.discard(process)


def scratch_dir(prefix: str, parent: Path | None = None) -> Path:
    """A fresh private temporary folder, removed by `remove` or `cancel_all`."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    with _guard:
        _folders.add(path)
    return path


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


def cancelled() -> bool:
    return _cancelled.is_set()


def live_pids() -> list[int]:
    """The children running now (for tests and diagnostics)."""
    with _guard:
        return sorted(p.pid for p in _processes if p.poll() is None)
