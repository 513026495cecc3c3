"""Driving the toolkit worker from baseline: start it once, send requests, survive its crashes.

A request that crashes the worker (the native compiler can SIGSEGV / SIGABRT), hangs past
its timeout or is killed for memory becomes a `WorkerFailure` carrying the last log lines;
the next request starts a fresh worker, so one bad model never takes the run down.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baseline.errors import BaselineError, EnvironmentBroken
from baseline.runtime import children
from baseline.toolchain.provision import Toolchain

NO_ANSWER = "the toolkit did not answer within"
"""How a request that ran past its timeout fails (then `{seconds} s`): matched here (a slow
start is not damage) and by `baseline explore` (a candidate stopped at its limit)."""

WORKER_SCRIPT = Path(__file__).with_name("worker.py")
START_TIMEOUT = 180.0
DEFAULT_TIMEOUT = 600.0
TIMEOUT_ENV = "BASELINE_TOOLKIT_TIMEOUT"
LOG_TAIL_LINES = 12


class WorkerFailure(BaselineError):
    """The worker died or hung; `log_tail` holds what it printed last."""

    def __init__(self, message: str, log_tail: list[str]) -> None:
        super().__init__(message)
        self.log_tail = log_tail


@dataclass
class WorkerReply:
    response: dict[str, Any]
    log: str


def request_timeout() -> float:
    return float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT))


class ToolkitWorker:
    """One long-lived worker process for one toolchain, restarted after a failure."""

    def __init__(self, toolchain: Toolchain) -> None:
        self.toolchain = toolchain
        self.versions: dict[str, str] = {}
        self._process: subprocess.Popen[bytes] | None = None
        self._responses: int | None = None
        self._home: Path | None = None
        self._ready = False
        self._next_id = 0

    def request(self, request: dict[str, Any], timeout: float | None = None) -> WorkerReply:
        """Send one request; its `workdir` receives `toolkit.log`."""
        self.start()
        self._next_id += 1
        request = {**request, "id": self._next_id}
        log_path = Path(request["workdir"]) / "toolkit.log"
        assert self._process is not None and self._process.stdin is not None
        try:
            self._process.stdin.write((json.dumps(request) + "\n").encode())
            self._process.stdin.flush()
        except BrokenPipeError:
            self._fail_and_reset(log_path, "the toolkit worker exited before the request")
        response = self._read_response(timeout or request_timeout(), log_path)
        return WorkerReply(response=response, log=_read_text(log_path))

    def close(self) -> None:
        if self._process is not None:
            with contextlib.suppress(OSError):
                assert self._process.stdin is not None
                self._process.stdin.close()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._kill()
        self._reset()
        if self._home is not None:  # the worker's scratch: one folder per worker, gone with it
            children.remove(self._home)
            self._home = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        """Start the worker unless it is running, and wait until it is ready (requests call this
        themselves)."""
        self.launch()
        if self._ready:
            return
        assert self._home is not None
        try:
            ready = self._read_response(START_TIMEOUT, self._home / "startup.log")
        except WorkerFailure as failure:
            # slow to start (a loaded machine), killed (memory, or baseline stopping): no proof
            # of damage; an interpreter that exits on its own before it is ready is
            if children.cancelled() or NO_ANSWER in str(failure) or "killed by" in str(failure):
                raise
            raise self._damaged(failure.log_tail[-1] if failure.log_tail else str(failure)) from None
        if not ready.get("ready"):
            self._reset()
            raise self._damaged(str(ready.get("error") or "the worker did not start"))
        self.versions = ready.get("versions", {})
        self._ready = True

    def launch(self) -> None:
        """Start the worker's process unless it runs, without waiting for its toolkit import
        (~1.5-2 s): `WorkerPool.prestart` overlaps that with the caller's own work."""
        if self._process is not None and self._process.poll() is None:
            return
        self._reset()
        if self._home is None or not self._home.is_dir():  # children.cancel_all may have removed it
            self._home = children.scratch_dir("baseline-worker-")
        read_fd, write_fd = os.pipe()
        startup_log = self._home / "startup.log"
        # the toolkit's own temporary files (tempfile.mkdtemp in rknn.api and torch) go into the
        # worker's scratch, removed with it: in the caller's TMPDIR a killed worker left its
        # `tmpXXXX` folders behind (seen when SIGTERM stopped a verify mid-conversion)
        env = {**os.environ, "TQDM_DISABLE": "1", "PYTHONUNBUFFERED": "1", "TMPDIR": str(self._home)}
        env.pop("PYTHONPATH", None)  # baseline's own packages must not leak into the toolkit's
        try:
            # a session of its own: a native crash stays there; children.cancel_all ends it
            self._process = self._spawn(
                [str(self.toolchain.python), str(WORKER_SCRIPT), str(write_fd), str(startup_log)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(write_fd,),
                cwd=self._home,
                env=env,
            )
        finally:
            os.close(write_fd)
        self._responses = read_fd

    def _spawn(self, command: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        try:
            return children.spawn(command, **kwargs)
        except OSError as error:
            if os.access(command[0], os.X_OK):
                raise  # not the interpreter (a working directory, a file descriptor)
            raise self._damaged(f"cannot run {command[0]}: {error.strerror or error}") from None

    def _damaged(self, reason: str) -> EnvironmentBroken:
        version = self.toolchain.version
        return EnvironmentBroken(
            f"the rknn-toolkit2 {version} environment {self.toolchain.path} is damaged ({reason.strip()}); "
            f"rebuild it with `baseline toolchain install --force {version}`"
        )

    def _read_response(self, timeout: float, log_path: Path) -> dict[str, Any]:
        assert self._responses is not None
        deadline = time.monotonic() + timeout
        buffer = b""
        while not buffer.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._kill()
                self._fail_and_reset(log_path, f"{NO_ANSWER} {timeout:.0f} s")
            readable, _, _ = select.select([self._responses], [], [], remaining)
            if not readable:
                continue
            chunk = os.read(self._responses, 1 << 16)
            if not chunk:
                self._fail_and_reset(log_path, self._death_message())
            buffer += chunk
        response: dict[str, Any] = json.loads(buffer)
        return response

    def _death_message(self) -> str:
        assert self._process is not None
        code = self._process.wait()
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            return f"the toolkit process was killed by {name} (a native compiler crash or out of memory)"
        return f"the toolkit process exited with code {code}"

    def _fail_and_reset(self, log_path: Path, message: str) -> None:
        tail = _read_text(log_path).splitlines()[-LOG_TAIL_LINES:]
        self._reset()
        raise WorkerFailure(message, tail)

    def _kill(self) -> None:
        if self._process is not None:
            children.kill(self._process)

    def _reset(self) -> None:
        self._kill()
        if self._responses is not None:
            os.close(self._responses)
        self._process, self._responses, self._ready = None, None, False


def _read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


class WorkerPool:
    """Long-lived workers per toolkit version, lent to one job at a time.

    Parallel jobs of one toolchain each get their own worker; a worker that finished a job
    is reused by the next, so the toolkit's import is paid once per worker, not per job.
    """

    def __init__(self) -> None:
        self._idle: dict[str, list[ToolkitWorker]] = {}
        self._all: list[ToolkitWorker] = []
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def borrow(self, toolchain: Toolchain) -> Iterator[ToolkitWorker]:
        key = str(toolchain.path)  # an environment, not a version: a rebuilt or moved one is new
        with self._lock:
            idle = self._idle.setdefault(key, [])
            worker = idle.pop() if idle else self._new(toolchain)
        try:
            yield worker
        finally:
            with self._lock:
                self._idle.setdefault(key, []).append(worker)

    def prestart(self, toolchain: Toolchain, count: int) -> None:
        """Launch up to `count` idle workers for `toolchain` now, for jobs that will borrow
        them: their toolkit import runs while the caller does its own start-up work."""
        key = str(toolchain.path)
        with self._lock:
            idle = self._idle.setdefault(key, [])
            while len(idle) < count:
                idle.append(self._new(toolchain))
            for worker in idle[:count]:  # under the lock: a job may borrow one at once
                worker.launch()

    def retire_idle(self) -> None:
        """Close every idle worker: the next jobs start new toolkit processes."""
        with self._lock:
            retired = [worker for idle in self._idle.values() for worker in idle]
            self._idle.clear()
            self._all = [worker for worker in self._all if worker not in retired]
        for worker in retired:
            worker.close()

    def _new(self, toolchain: Toolchain) -> ToolkitWorker:
        worker = ToolkitWorker(toolchain)
        self._all.append(worker)
        return worker

    def close(self) -> None:
        with self._lock:
            for worker in self._all:
                worker.close()
            self._all.clear()
            self._idle.clear()
