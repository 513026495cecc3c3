"""The files of one baseline project: lock, intent, root and where tensors are stored."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from baseline.files.fsutil import remove_stale_temps
from baseline.models.lock import FilePin
from baseline.project.intent import intent_path_for
from baseline.project.lockfile import writers_lock
from baseline.project.paths import ProjectPaths, find_project_root


@dataclass(frozen=True)
class Project:
    """Locations resolved once from the command line."""

    lock_path: Path
    intent_path: Path
    root: Path
    _paths: ProjectPaths | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def locate(cls, lock: Path, config: Path | None = None, root: Path | None = None) -> Project:
        intent = config if config is not None else intent_path_for(lock)
        base = root if root is not None else find_project_root(intent.resolve().parent)
        return cls(lock_path=lock, intent_path=intent, root=base.resolve())

    def absolute(self) -> Project:
        """The same project with absolute paths, for a process that may not share our cwd."""
        return Project(self.lock_path.resolve(), self.intent_path.resolve(), self.root.resolve())

    def __reduce__(self) -> tuple[type[Project], tuple[Path, Path, Path]]:
        """Pickled (for a Ray task) with absolute paths: the worker's cwd is not ours."""
        absolute = self.absolute()
        return Project, (absolute.lock_path, absolute.intent_path, absolute.root)

    def resolve(self, relative: str, where: str, *, file: bool = False) -> Path:
        """A path from the intent or the lock, refused if it leaves the project (or, for a
        `file`, if it is the project folder itself)."""
        return self._project_paths().resolve(relative, where, file=file)

    def _project_paths(self) -> ProjectPaths:
        paths = self._paths
        # `is` first: a verify of 1,000 models asks ~16,000 times, and `Path.__eq__` is slow
        if paths is None or (paths.root is not self.root and paths.root != self.root):
            paths = ProjectPaths(self.root)
            object.__setattr__(self, "_paths", paths)  # frozen: a cache, not state
        return paths

    def forget_paths(self) -> None:
        """Start a command: paths are resolved anew (the files may have changed since the last)."""
        object.__setattr__(self, "_paths", ProjectPaths(self.root))

    def relative(self, path: Path) -> str:
        return self._project_paths().relative(path)

    def pinned(self, pin: FilePin, where: str) -> Path:
        return self.resolve(pin.path, f"{self.lock_path}: {where}", file=True)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Serialise writers of this lock (`lock`, `accept`, `env --record`) across processes."""
        with writers_lock(self.lock_path):
            remove_stale_temps(self.lock_path)  # a writer killed with -9 left them; none runs now
            yield

    def default_tensor_dir(self) -> Path:
        return self.lock_path.resolve().parent / "tensors"
