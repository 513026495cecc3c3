"""Content hashes of files."""

from __future__ import annotations

import hashlib
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
