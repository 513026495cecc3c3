from __future__ import annotations

from pathlib import Path

import pytest

from baseline.errors import ConfigError
from baseline.lockfile import HEADER, load_lock, render_lock, write_lock
from tests.conftest import LOCK


def test_render_is_deterministic_and_round_trips(demo: Path) -> None:
    lock = load_lock(demo / LOCK)
    text = render_lock(lock)
    assert text.startswith(HEADER) and "generated" in text
    assert render_lock(lock) == text
    assert (demo / LOCK).read_text() == text
    assert load_lock(demo / LOCK) == lock


def test_write_only_when_changed(demo: Path) -> None:
    lock = load_lock(demo / LOCK)
    assert write_lock(demo / LOCK, lock) is False
    changed = lock.model_copy(update={"inputs_hash": "0" * 64})
    assert write_lock(demo / LOCK, changed) is True
    assert not list((demo / LOCK).parent.glob(".*.tmp")), "temporary file left behind"


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
