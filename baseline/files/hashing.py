"""Content hashes of files."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from baseline.errors import InputError

CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file's bytes."""
    try:
        with path.open("rb") as stream:
            if hasattr(hashlib, "file_digest"):  # Python 3.11+: releases the GIL, no copies
                return str(hashlib.file_digest(stream, "sha256").hexdigest())
            digest = hashlib.sha256()
            while chunk := stream.read(CHUNK):
                digest.update(chunk)
            return digest.hexdigest()
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a file") from None


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def stat_signature(stat: os.stat_result) -> list[int]:
    """What says a file is unchanged without reading it (as git's index): size, mtime, inode,
    ctime, device. Kept by `FileHashes` between runs and used by `file_key` within one."""
    return [stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_ctime_ns, stat.st_dev]


SETTLED_AFTER = 2.0
"""Seconds since a file's last change after which its stat signature stands for its bytes: a
file rewritten within one tick of the filesystem's clock (jiffies on ext4) keeps its times."""


def file_key(path: Path) -> str:
    """A key that changes when the file's bytes do, for caches of work on a file within one
    process: its `stat_signature` once the file has settled, else its sha256 (~40 ms for
    54 MB). "" if it cannot be read, so that the work itself reports the error."""
    try:
        stat = path.stat()
        if time.time() - max(stat.st_mtime, stat.st_ctime) > SETTLED_AFTER:
            return "stat:" + ":".join(map(str, stat_signature(stat)))
        return sha256_file(path)
    except (InputError, OSError):
        return ""
