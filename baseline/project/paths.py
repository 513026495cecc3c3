"""Project-relative paths. Every path read from a lock or intent file goes through here.

A lock may come from an untrusted pull request, so a path must never make baseline
read or write outside the project: absolute paths, `..` escapes and symlinks that
leave the project are refused.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import os
import re
import stat
from pathlib import Path, PurePosixPath

from baseline.errors import ConfigError

PROJECT_MARKERS = (".git", "pyproject.toml")
CACHE_ENV = "BASELINE_CACHE"
CACHE_DIR_NAME = ".baseline-cache"
RESULTS_FOLDER = "results"
"""Inside the cache root: verify's stored job results (`baseline.verification.cache.ResultCache`)."""


def cache_root(project_root: Path) -> Path:
    """The folder of the project's result cache: `$BASELINE_CACHE`, else inside the project."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else project_root / CACHE_DIR_NAME


LOCK_NAME = "baseline.lock"
INTENT_NAME = "baseline.toml"


def find_lock(start: Path) -> Path | None:
    """The default lock seen from `start`, found the way git finds its repository: in the
    nearest folder from `start` up that holds a `baseline.lock`, or a `baseline.toml` to write
    one from. The walk stops at the git checkout's top (a lock of another checkout is not this
    project's); None when no folder on the way has either file."""
    start = start.absolute()
    for folder in (start, *start.parents):
        if (folder / LOCK_NAME).is_file() or (folder / INTENT_NAME).is_file():
            return folder / LOCK_NAME
        if (folder / ".git").exists():
            return None
    return None


WRITERS_FOLDER = "writers"
"""Inside the cache root: the advisory locks that serialise writers of each baseline lock."""


def writer_lock_path(lock_path: Path) -> Path:
    """The advisory lock file that serialises writers of one baseline lock (`lock`, `accept`,
    `env --record`, `matrix --record`).

    It lives in the cache folder of the lock's project, not beside the lock: an empty
    `.baseline.lock.writing` in the user's tree showed as an untracked file after every `lock`.
    Named by the lock's real path, so the locks of one project, or of projects sharing
    `$BASELINE_CACHE`, never share one. Derived from the lock path alone (not `--root`), so every
    writer of the same lock agrees on it."""
    real = lock_path.resolve()
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:16]
    return cache_root(find_project_root(real.parent)) / WRITERS_FOLDER / f"{real.name}.{digest}.writing"


def find_project_root(start: Path) -> Path:
    """The nearest ancestor of `start` holding `.git` or `pyproject.toml`, else `start`."""
    start = start.resolve()
    for directory in (start, *start.parents):
        if any((directory / marker).exists() for marker in PROJECT_MARKERS):
            return directory
    return start


def resolve_in_project(root: Path, relative: str, where: str, *, file: bool = False) -> Path:
    """Resolve a project-relative path from a file, refusing anything that leaves `root`.

    `where` names the file and key the path came from, for the error message; `file` says the
    key names a file, so the project folder itself (`"."`) is refused too.
    """
    resolved = (root / Path(*_parts(root, relative, where))).resolve()
    return _confined(root, root.resolve(), relative, where, file, resolved)


def _parts(root: Path, relative: str, where: str) -> tuple[str, ...]:
    """The path's components, once it is known to be neither degenerate nor absolute."""
    _refuse_degenerate(root, relative, where)
    posix = PurePosixPath(relative.replace("\\", "/"))
    if posix.is_absolute() or relative.startswith(("/", "\\")) or ":" in "".join(posix.parts[:1]):
        raise ConfigError(f"{where}: path {relative!r} is absolute; write it relative to {root}")
    return posix.parts


def _confined(root: Path, real_root: Path, relative: str, where: str, file: bool, resolved: Path) -> Path:
    """`resolved` (the path with every symlink followed) if it stays inside `root`."""
    if not resolved.is_relative_to(real_root):
        raise ConfigError(f"{where}: path {relative!r} leaves the project {root}; keep files inside it")
    if file and resolved == real_root:
        # "." or "a/.." is the project folder itself: read as a file it fails deep inside a reader
        raise ConfigError(
            f"{where}: path {relative!r} is the project folder itself; name a file or folder in it"
        )
    return resolved


class ProjectPaths:
    """`resolve_in_project` for many paths of one project, resolving each folder once.

    A lock of 1,000 models names ~5,000 files in ~2,000 folders, each looked up 3-4 times by a
    verify; `Path.resolve` costs a `lstat` per component (~0.2 ms). Each folder is resolved once,
    the last component gets one `lstat` (a symlink, `..` or `.` there is resolved in full, so
    the same paths are refused as before), and each answer is kept for the rest of the command:
    `verify_project` and `build_lock` start with a fresh instance (`Project.forget_paths`).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._real_root = root.resolve()
        self._folders: dict[tuple[str, ...], tuple[Path, bool]] = {}
        self._answers: dict[str, tuple[Path, bool]] = {}
        """Each path's real path and whether it is the project folder itself."""
        self._relative: dict[Path, str] = {}

    def relative(self, path: Path) -> str:
        """`to_project_relative`, each path's answer kept for the command as `resolve`'s are."""
        known = self._relative.get(path)
        if known is None:
            known = self._relative[path] = to_project_relative(self.root, path)
        return known

    def resolve(self, relative: str, where: str, *, file: bool = False) -> Path:
        known = self._answers.get(relative)
        if known is None:
            resolved = self._resolve(relative, where, False)
            known = self._answers[relative] = (resolved, resolved == self._real_root)
        if file and known[1]:  # one answer for both uses: a file adds only this refusal
            _confined(self.root, self._real_root, relative, where, file, known[0])
        return known[0]

    def _resolve(self, relative: str, where: str, file: bool) -> Path:
        if _PLAIN.match(relative):  # most paths: split at the slashes, no checks to repeat
            *folders, name = relative.split("/")
            folder, inside = self._folder(tuple(folders))
            path = folder / name
            resolved = _follow(path)
            if inside and resolved is path:  # a plain name in a folder known to be inside
                return resolved
            return _confined(self.root, self._real_root, relative, where, file, resolved)
        parts = _parts(self.root, relative, where)
        if not parts or parts[-1] in (".", ".."):
            return resolve_in_project(self.root, relative, where, file=file)
        resolved = _follow(self._folder(parts[:-1])[0] / parts[-1])
        return _confined(self.root, self._real_root, relative, where, file, resolved)

    def _folder(self, parts: tuple[str, ...]) -> tuple[Path, bool]:
        """The folder's real path, and whether it is inside the project; `..` is kept inside
        the key, so `a/..` is resolved as written."""
        found = self._folders.get(parts)
        if found is None:
            found = self._folders[parts] = self._real_folder(parts)
        return found

    def _real_folder(self, parts: tuple[str, ...]) -> tuple[Path, bool]:
        """From the parent's real path, one `lstat` (a zoo has a tensor folder per model, and a
        full `Path.resolve` costs an `lstat` per component); `.` and `..` resolved as written.
        A folder is inside when its parent is and no link was followed to reach it, or when
        its real path says so."""
        if not parts:
            return self._real_root, True
        if parts[-1] in (".", ".."):
            resolved = (self.root / Path(*parts)).resolve()
            return resolved, resolved.is_relative_to(self._real_root)
        parent, inside = self._folder(parts[:-1])
        path = parent / parts[-1]
        resolved = _follow(path)
        if inside and resolved is path:
            return resolved, True
        return resolved, resolved.is_relative_to(self._real_root)


_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_][A-Za-z0-9_.-]*)*\Z")
"""A relative path whose parts are its slash-separated names: none empty, `.` or `..`, none
starting with `.` or `-`, no backslash, colon or NUL (anything else takes `_parts`)."""


def _follow(path: Path) -> Path:
    """`path.resolve()` for a path whose parent is already a real path: only its last
    component can be a symlink, so one `lstat` tells whether there is anything to follow."""
    try:
        is_link = stat.S_ISLNK(os.lstat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        is_link = False  # as `Path.resolve`: a missing component is kept as written
    except OSError:
        is_link = True  # anything unusual: let `Path.resolve` decide, as before
    return path.resolve() if is_link else path


def _refuse_degenerate(root: Path, relative: str, where: str) -> None:
    """Paths no file system accepts: empty, or with a NUL (which `Path.resolve` raises on)."""
    if not relative.strip():
        raise ConfigError(f"{where}: path is empty; write a path relative to {root}")
    if "\0" in relative:
        raise ConfigError(f"{where}: path {relative!r} contains a NUL character; remove it")


def to_project_relative(root: Path, path: Path) -> str:
    """The forward-slash form of `path` relative to `root`, as stored in a lock."""
    return path.resolve().relative_to(root.resolve()).as_posix()


NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
"""What a model or target name may be: the intent's `Name`. A name never holds `/` or starts
with `.`, so `folder / name` cannot leave `folder`."""
MAX_NAME_LENGTH = 128


def checked_name(name: str, where: str) -> str:
    """`name` if it is safe as one path component; a name from a lock is never trusted blindly."""
    if len(name) > MAX_NAME_LENGTH or not NAME_PATTERN.match(name):
        raise ConfigError(
            f"{where}: name {name!r} is not a valid name (letters, digits, '_', '.', '-', not "
            "starting with '.' or '-'); run `baseline lock` to regenerate the lock"
        )
    return name


def regular_files_under(root: Path, folder: Path, where: str) -> list[Path]:
    """Every regular file below `folder`, sorted, without following symlinked folders.

    A symlink may point to another file of the project; one that leaves `root` or names
    anything but a regular file (a FIFO would hang the read, a device never ends) is refused.
    """
    root = root.resolve()
    found: list[Path] = []
    for directory, subdirs, files in os.walk(folder, followlinks=False):
        subdirs.sort()
        for name in files:
            found.append(checked_regular_file(root, Path(directory) / name, where))
    return sorted(found)


def checked_regular_file(root: Path, path: Path, where: str) -> Path:
    """`path` if it (or its symlink's target) is a regular file inside `root`, else ConfigError."""
    resolved = path.resolve()
    if not resolved.is_relative_to(root.resolve()):
        raise ConfigError(f"{where}: {path} is a symlink that leaves the project {root}; remove it")
    try:
        mode = resolved.stat().st_mode
    except OSError as error:
        raise ConfigError(f"{where}: {path} cannot be read ({error.strerror}); remove it") from None
    if not stat.S_ISREG(mode):
        raise ConfigError(f"{where}: {path} is not a regular file; remove it")
    return path


MAX_GLOB_ENTRIES = 200_000
"""Directory entries one glob may visit: a zoo's image folders hold thousands, not millions."""


def glob_files(root: Path, pattern: str, where: str) -> list[Path]:
    """Files under `root` whose relative path matches `pattern` (`*`, `?`, `[...]` within a name,
    `**` for any number of folders), sorted; hidden names only where the pattern says so.

    Unlike `glob.glob(recursive=True)`, folders are walked without following symlinks, and the
    walk is bounded: a pull request that adds `a -> .` and `b -> .` inside an image folder made a
    `**` pattern name 2^40 paths and `lock` run for ever. A symlinked file is still matched (the
    caller confines it)."""
    parts = PurePosixPath(pattern).parts
    fixed = next((i for i, part in enumerate(parts) if _is_wildcard(part)), len(parts))
    base = root.joinpath(*parts[:fixed])
    wanted = parts[fixed:]
    if not wanted:
        return [base] if base.is_file() else []
    found, visited = [], 0
    for directory, subdirs, files in os.walk(base, followlinks=False):
        visited += len(subdirs) + len(files)
        if visited > MAX_GLOB_ENTRIES:
            raise ConfigError(
                f"{where}: {pattern!r} walks more than {MAX_GLOB_ENTRIES} files and folders; "
                "point it at the images' own folder"
            )
        relative = Path(directory).relative_to(base).parts
        found += [Path(directory) / name for name in files if _matches((*relative, name), wanted)]
    return sorted(found)


def _is_wildcard(part: str) -> bool:
    return any(char in part for char in "*?[")


def _matches(names: tuple[str, ...], patterns: tuple[str, ...]) -> bool:
    """Whether path components `names` match pattern components (`**`: zero or more of them)."""

    @functools.cache
    def match(n: int, p: int) -> bool:
        if p == len(patterns):
            return n == len(names)
        if patterns[p] == "**":
            return match(n, p + 1) or (n < len(names) and not _hidden(names[n], "**") and match(n + 1, p))
        return (
            n < len(names)
            and not _hidden(names[n], patterns[p])
            and fnmatch.fnmatchcase(names[n], patterns[p])
            and match(n + 1, p + 1)
        )

    return match(0, 0)


def _hidden(name: str, pattern: str) -> bool:
    """As glob does: a wildcard never matches a name that starts with a dot."""
    return name.startswith(".") and not pattern.startswith(".")
