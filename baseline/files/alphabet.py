"""A CTC task's character list, read defensively: the one reader for `lock` (which pins the
symbols in the task) and for a task compared before it is locked."""

from __future__ import annotations

from pathlib import Path

from baseline.errors import InputError

MAX_ALPHABET_BYTES = 4 * 1024 * 1024
"""Far above a real dictionary: thousands of symbols take tens of KB."""


def read_alphabet(path: Path, where: str) -> list[str]:
    """A CTC character list, one symbol per line (trailing newline ignored), as PaddleOCR writes
    its dictionaries: bounded, UTF-8, a regular file. `path` is resolved inside the project by the
    caller; the one reader for the lock (which pins the symbols) and for a task not locked yet."""
    try:
        if path.stat().st_size > MAX_ALPHABET_BYTES or not path.is_file():
            raise InputError(f"{where}: {path} is not a character list (over 4 MiB or not a file)")
        return path.read_text(encoding="utf-8").rstrip("\n").split("\n")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{where}: cannot read {path}: {error}") from None
