from __future__ import annotations

import shutil
from pathlib import Path

import git
import pytest

from baseline.errors import ConfigError
from baseline.models.lock import MatrixCell
from baseline.project.lockfile import (
    HEADER,
    load_lock,
    load_previous_lock,
    record_matrix,
    render_lock,
    write_lock,
)
from tests.conftest import LOCK, REPO


@pytest.mark.toolkit
def test_render_is_deterministic_and_round_trips(demo: Path) -> None:
    lock = load_lock(demo / LOCK)
    text = render_lock(lock)
    assert text.startswith(HEADER) and "generated" in text
    assert render_lock(lock) == text
    assert (demo / LOCK).read_text() == text
    assert load_lock(demo / LOCK) == lock


@pytest.mark.toolkit
def test_write_only_when_changed(demo: Path) -> None:
    lock = load_lock(demo / LOCK)
    assert write_lock(demo / LOCK, lock) is False
    changed = lock.model_copy(update={"inputs_hash": "0" * 64})
    assert write_lock(demo / LOCK, changed) is True
    assert not list((demo / LOCK).parent.glob(".*.tmp")), "temporary file left behind"


@pytest.mark.toolkit
@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda t: t.replace("schema_version = 1", "schema_version = 2"),
            "schema version 2 is newer",
        ),
        (
            lambda t: t.replace("schema_version = 1", 'schema_version = "one"'),
            "no integer schema_version",
        ),
        (lambda t: t.replace("schema_version = 1\n", ""), "no integer schema_version"),
        (
            lambda t: t.replace("schema_version = 1", "schema_version = 1\ncolour = 'red'"),
            "key colour: unknown key",
        ),
        (lambda t: t.replace("size = ", "size = -", 1), r"key models.0.onnx.size"),
        (lambda t: t + "[[[", "not valid TOML"),
    ],
)
def test_bad_locks_give_one_line_errors(demo: Path, mutate, message: str) -> None:
    path = demo / LOCK
    path.write_text(mutate(path.read_text()))
    with pytest.raises(ConfigError, match=message) as caught:
        load_lock(path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_invalid_utf8_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "baseline.lock"
    path.write_bytes(b"schema_version = 1\n# \xff\xfe\n")
    with pytest.raises(ConfigError, match="not valid UTF-8"):
        load_lock(path)


@pytest.fixture
def checked_in_lock(tmp_path: Path) -> Path:
    """The demo's committed lock, copied: a valid lock without locking anything (no toolkit)."""
    path = tmp_path / "baseline.lock"
    shutil.copy2(REPO / LOCK, path)
    return path


def test_record_matrix_stores_the_cells_and_keeps_the_rest(checked_in_lock: Path) -> None:
    before = load_lock(checked_in_lock)
    cell = MatrixCell(toolkit="2.3.2", model="classifier", target="rk3588", compiled=True, stage="simulate")
    returned = record_matrix(checked_in_lock, [cell])
    after = load_lock(checked_in_lock)
    assert after == returned and after.matrix == [cell]
    assert after.model_copy(update={"matrix": before.matrix}) == before


def test_previous_lock_is_a_file_when_one_exists(checked_in_lock: Path, tmp_path: Path) -> None:
    older = tmp_path / "release-1.lock"
    shutil.copy2(checked_in_lock, older)
    assert load_previous_lock(checked_in_lock, str(older)) == load_lock(older)


def test_previous_lock_is_otherwise_a_git_revision(checked_in_lock: Path, tmp_path: Path) -> None:
    repo = git.Repo.init(tmp_path)
    with repo.config_writer() as config:
        config.set_value("user", "name", "test").set_value("user", "email", "test@example.com")
    repo.index.add([str(checked_in_lock)])
    repo.index.commit("release 1")
    repo.create_tag("v1")
    committed = load_lock(checked_in_lock)
    write_lock(checked_in_lock, committed.model_copy(update={"inputs_hash": "0" * 64}))
    assert load_previous_lock(checked_in_lock, "v1") == committed
    with pytest.raises(ConfigError, match="cannot read it at git revision 'v2'"):
        load_previous_lock(checked_in_lock, "v2")
