"""Atomic file writes: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from baseline.errors import BaselineError


class WriteError(BaselineError):
    """A file could not be written; the previous version is untouched."""


@contextlib.contextmanager
def atomic_writer(path: Path, durable: bool = True) -> Iterator[BinaryIO]:
    """Yield a temporary file next to `path`; on success it replaces `path` atomically.
    `durable` also waits for the bytes to reach the disk before the rename (a lock, a report);
    a cache entry skips it: lost in a crash it is only a miss (1,000 lock jobs spent 1.6 s
    in `fsync`)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp_name = _create_temp(path)
    except OSError as error:
        raise _write_error(path, error) from None
    try:
        with os.fdopen(handle, "wb") as stream:
            yield stream
            stream.flush()
            if durable:
                os.fsync(stream.fileno())
        os.replace(temp_name, path)
    except BaseException as error:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        if isinstance(error, OSError):
            raise _write_error(path, error) from None
        raise


@contextlib.contextmanager
def exclusive_lock(lock_path: Path) -> Iterator[None]:
    """Hold an advisory lock on `lock_path` (created if needed) for the duration of the block.

    The kernel drops it when the process dies, so a killed run never leaves it held.
    """
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        handle = lock_path.open("a")
    except OSError as error:  # a read-only checkout: one line naming the folder, not a traceback
        raise _write_error(lock_path, error) from None
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def remove_stale_temps(path: Path) -> list[Path]:
    """Delete the temporary files `atomic_writer` makes next to `path` (`.name.<hex>.tmp`). Call
    it only while holding the writers' lock of `path`: then no other writer owns one, and any
    found was left by a run that was killed before it could rename or remove it."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.[0-9a-f]{{12}}\.tmp")
    try:
        entries = list(path.parent.iterdir())
    except OSError:  # no folder to list (yet, or not one): nothing left there; the write says why
        return []
    stale = [
        entry
        for entry in entries
        if pattern.fullmatch(entry.name) and entry.is_file() and not entry.is_symlink()
    ]
    for entry in stale:
        with contextlib.suppress(FileNotFoundError):
            entry.unlink()
    return stale


def _write_error(path: Path, error: OSError) -> WriteError:
    return WriteError(
        f"{path}: could not write it ({error.strerror or error}); nothing was "
        "changed — free space or fix permissions and rerun"
    )


def _create_temp(path: Path) -> tuple[int, str]:
    """A new temporary file next to `path` with the usual file mode.

    Created with mode 0o666 so the kernel applies the umask itself: reading the umask means
    setting it, which from a job thread races with every other thread creating files.
    `mkstemp` would make it 0600. O_EXCL and O_NOFOLLOW: never reuse or follow a planted name.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        name = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(name, flags, 0o666), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name next to {path}")


def write_atomic(path: Path, data: bytes, durable: bool = True) -> bool:
    """Write `data` to `path` atomically unless it already holds exactly that.

    Returns whether the file changed, so callers can say "unchanged".
    """
    if path.is_file() and path.read_bytes() == data:
        return False
    with atomic_writer(path, durable) as stream:
        stream.write(data)
    return True
