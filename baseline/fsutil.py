"""Atomic file writes: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from baseline.errors import BaselineError


class WriteError(BaselineError):
    """A file could not be written; the previous version is untouched."""


@contextlib.contextmanager
def atomic_writer(path: Path) -> Iterator[BinaryIO]:
    """Yield a temporary file next to `path`; on success it replaces `path` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(handle, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual file mode
        with os.fdopen(handle, "wb") as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp_name, path)
    except BaseException as error:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        if isinstance(error, OSError):
            raise WriteError(
                f"{path}: could not write it ({error.strerror or error}); nothing was "
                "changed — free space or fix permissions and rerun"
            ) from None
        raise


@contextlib.contextmanager
def exclusive_lock(lock_path: Path) -> Iterator[None]:
    """Hold an advisory lock on `lock_path` (created if needed) for the duration of the block.

    The kernel drops it when the process dies, so a killed run never leaves it held.
    """
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def writer_lock_path(lock_path: Path) -> Path:
    """The advisory lock file that serialises writers of one baseline lock."""
    return lock_path.with_name(f".{lock_path.name}.writing")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: Path, data: bytes) -> bool:
    """Write `data` to `path` atomically unless it already holds exactly that.

    Returns whether the file changed, so callers can say "unchanged".
    """
    if path.is_file() and path.read_bytes() == data:
        return False
    with atomic_writer(path) as stream:
        stream.write(data)
    return True
