from __future__ import annotations

from pathlib import Path

import pytest

from baseline.errors import ConfigError
from baseline.fsutil import WriteError
from baseline.paths import find_project_root, resolve_in_project
from baseline.project import Project


@pytest.mark.parametrize("relative", ["/etc/passwd", "../outside.onnx", "a/../../outside", "C:/x.onnx"])
def test_paths_leaving_the_project_are_refused(tmp_path: Path, relative: str) -> None:
    with pytest.raises(ConfigError, match="intent.toml: key x"):
        resolve_in_project(tmp_path, relative, "intent.toml: key x")


def test_symlink_out_of_the_project_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (tmp_path / "secret.onnx").write_text("x")
    (root / "link.onnx").symlink_to(tmp_path / "secret.onnx")
    with pytest.raises(ConfigError, match="leaves the project"):
        resolve_in_project(root, "link.onnx", "lock")


def test_inside_paths_resolve(tmp_path: Path) -> None:
    assert resolve_in_project(tmp_path, "a/b/../c.onnx", "w") == (tmp_path / "a/c.onnx").resolve()


def test_project_root_is_the_nearest_marker(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "lockfiles" / "demo").mkdir(parents=True)
    assert find_project_root(tmp_path / "lockfiles" / "demo") == tmp_path.resolve()


def test_temporary_files_a_killed_writer_left_are_removed_by_the_next_writer(tmp_path: Path) -> None:
    """`kill -9` between writing and renaming leaves `.baseline.lock.<hex>.tmp`; they piled up.
    The next writer, holding the writers' lock, removes them, and nothing else."""
    (tmp_path / "pyproject.toml").write_text("")
    left = tmp_path / ".baseline.lock.0123456789ab.tmp"
    left.write_bytes(b"half a lock")
    kept = [tmp_path / ".baseline.lock.notours.tmp", tmp_path / ".other.lock.0123456789ab.tmp"]
    for path in kept:
        path.write_bytes(b"")
    with Project.locate(tmp_path / "baseline.lock").exclusive():
        assert not left.exists()
    assert all(path.exists() for path in kept)


def test_a_folder_that_cannot_be_written_gets_one_line_from_a_writer(tmp_path: Path) -> None:
    """`lock`, `accept` and `pytest --baseline-update` take the writers' lock first: where nothing
    can be written (a read-only checkout; here a file where the lock's folder should be, as root
    ignores permissions), that is one error naming the file, not an OSError traceback."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "locks").write_text("a file, not a folder")
    project = Project.locate(tmp_path / "locks" / "baseline.lock", root=tmp_path)
    with (
        pytest.raises(WriteError, match=r"\.baseline\.lock\.writing: could not write it"),
        project.exclusive(),
    ):
        pass
