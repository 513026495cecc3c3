"""Project-relative paths. Every path read from a lock or intent file goes through here.

A lock may come from an untrusted pull request, so a path must never make baseline
read or write outside the project: absolute paths, `..` escapes and symlinks that
leave the project are refused.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from baseline.errors import ConfigError

PROJECT_MARKERS = (".git", "pyproject.toml")


def find_project_root(start: Path) -> Path:
    """The nearest ancestor of `start` holding `.git` or `pyproject.toml`, else `start`."""
    start = start.resolve()
    for directory in (start, *start.parents):
        if any((directory / marker).exists() for marker in PROJECT_MARKERS):
            return directory
    return start


def resolve_in_project(root: Path, relative: str, where: str) -> Path:
    """Resolve a project-relative path from a file, refusing anything that leaves `root`.

    `where` names the file and key the path came from, for the error message.
    """
    posix = PurePosixPath(relative.replace("\\", "/"))
    if posix.is_absolute() or relative.startswith(("/", "\\")) or ":" in posix.parts[0]:
        raise ConfigError(f"{where}: path {relative!r} is absolute; write it relative to {root}")
    resolved = (root / Path(*posix.parts)).resolve()
    if not resolved.is_relative_to(root.resolve()):
        raise ConfigError(f"{where}: path {relative!r} leaves the project {root}; keep files inside it")
    return resolved


def to_project_relative(root: Path, path: Path) -> str:
    """The forward-slash form of `path` relative to `root`, as stored in a lock."""
    return path.resolve().relative_to(root.resolve()).as_posix()
