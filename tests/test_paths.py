from __future__ import annotations

import fcntl
import subprocess
from pathlib import Path

import onnx
import pytest

from baseline.errors import ConfigError
from baseline.files.fsutil import WriteError, write_atomic
from baseline.locker import lock_project
from baseline.project.layout import Project
from baseline.project.paths import find_project_root, resolve_in_project, writer_lock_path
from tests.test_limits import loop_model


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
    """`lock`, `accept` and `pytest --baseline-update` take the writers' lock first, in the cache
    folder, then write the lock: where either cannot be written (a read-only checkout; here a
    file where a folder should be, as root ignores permissions), that is one error naming the
    file, not an OSError traceback."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / ".baseline-cache").write_text("a file, not the cache folder")
    writers = r"\.baseline-cache/writers/baseline\.lock\.[0-9a-f]{16}\.writing: could not write it"
    with pytest.raises(WriteError, match=writers), Project.locate(tmp_path / "baseline.lock").exclusive():
        pass
    (tmp_path / ".baseline-cache").unlink()
    (tmp_path / "locks").write_text("a file, not a folder")
    project = Project.locate(tmp_path / "locks" / "baseline.lock", root=tmp_path)
    with (
        pytest.raises(WriteError, match=r"locks/baseline\.lock: could not write it"),
        project.exclusive(),
    ):
        write_atomic(project.lock_path, b"schema_version = 1\n")


def test_a_lock_written_in_a_git_checkout_leaves_no_other_new_file(tmp_path: Path) -> None:
    """An empty `.baseline.lock.writing` was left beside the lock after every `lock`: an untracked
    file in the user's tree. The writers' lock is in the cache folder, which ignores itself."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    onnx.save(loop_model(3), tmp_path / "model.onnx")
    (tmp_path / "baseline.toml").write_text(
        '[defaults]\nbackends = ["onnxruntime"]\n[[models]]\nname = "m"\nonnx = "model.onnx"\n'
    )
    subprocess.run(["git", "add", "model.onnx", "baseline.toml"], cwd=tmp_path, check=True)
    lock_project(Project.locate(tmp_path / "baseline.lock"))
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=tmp_path, check=True, capture_output=True, text=True
    ).stdout.splitlines()
    assert sorted(line for line in status if line.startswith("??")) == ["?? baseline.lock", "?? tensors/"]


def test_every_writer_of_one_lock_takes_the_same_writers_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Moved into the cache folder, the writers' lock still serialises `lock`, `accept` and
    `env --record` of one lock however its path is spelled, and only of that lock."""
    (tmp_path / "pyproject.toml").write_text("")
    monkeypatch.chdir(tmp_path)
    writers = writer_lock_path(tmp_path / "baseline.lock")
    assert writers == writer_lock_path(Path("baseline.lock")) == writer_lock_path(Path("a/../baseline.lock"))
    assert writers != writer_lock_path(tmp_path / "other.lock")
    project = Project.locate(Path("baseline.lock"), root=tmp_path / "elsewhere")
    with project.exclusive(), writers.open("a") as held, pytest.raises(BlockingIOError):
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert (tmp_path / ".baseline-cache" / ".gitignore").is_file()
