"""Finding the lock as git finds its repository (issue 29): from a subfolder of the project, and a
missing `--lock` explained by what is around it instead of advising a `baseline lock` that fails."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from baseline.errors import ConfigError
from baseline.locker import lock_project
from baseline.project.layout import Project
from baseline.project.lockfile import load_lock
from baseline.project.paths import find_lock
from tests.conftest import one_line_error

Cli = Callable[..., tuple[int, str, str]]
INTENT = '[defaults]\nbackends = ["onnxruntime"]\n[[models]]\nname = "m"\nonnx = "model.onnx"\n'


def relu() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.fixture
def locked(tmp_path: Path) -> Path:
    """A locked onnxruntime-only project in a git checkout, with a subfolder."""
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    (root / "src" / "deep").mkdir(parents=True)
    onnx.save(relu(), root / "model.onnx")
    (root / "baseline.toml").write_text(INTENT)
    lock_project(Project.locate(root / "baseline.lock"))
    return root


def test_verify_in_a_subfolder_finds_the_projects_lock(locked: Path, cli: Cli) -> None:
    code, out, err = cli(locked / "src" / "deep", "verify")
    assert code == 0, out + err
    assert out.startswith("baseline verify ../../baseline.lock")


def test_the_walk_up_stops_at_the_git_checkout(locked: Path) -> None:
    assert find_lock(locked / "src" / "deep") == locked / "baseline.lock"
    (locked / "baseline.lock").unlink()
    assert find_lock(locked / "src") == locked / "baseline.lock", "an intent file is a project too"
    (locked / "baseline.toml").unlink()
    (locked.parent / "baseline.lock").write_text("")  # beside the checkout: not this project's
    assert find_lock(locked / "src") is None


def test_a_config_given_keeps_the_default_lock_here(locked: Path, cli: Cli) -> None:
    """`lock --config other.toml` in a subfolder writes the lock there, never the project's."""
    (locked / "src" / "other.toml").write_text(INTENT)
    code, _, err = cli(locked / "src", "lock", "--config", "other.toml")
    assert code == 0, err
    assert (locked / "src" / "baseline.lock").is_file()


@pytest.mark.parametrize(
    ("where", "lock", "meant"),
    [
        ("", "baseline.lok", "baseline.lock"),  # a typo in the suffix: baseline.toml is beside it
        ("", "basline.lock", "baseline.lock"),
        ("src/deep", "nothere.lock", "../../baseline.lock"),
        ("src", "missing/x.lock", "../baseline.lock"),
    ],
)
def test_a_missing_lock_names_the_path_and_the_lock_meant(
    locked: Path, cli: Cli, where: str, lock: str, meant: str
) -> None:
    code, _, err = cli(locked / where, "verify", "--lock", lock)
    assert code == 2
    assert one_line_error(err) == (
        f"error: {lock}: lock not found: the file does not exist; did you mean {meant}?"
    )


def test_baseline_lock_is_advised_only_where_it_can_write_the_lock(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    with pytest.raises(
        ConfigError, match=r"nothing\.lock: lock not found: the file does not exist, nor .*nothing\.toml"
    ):
        load_lock(tmp_path / "nothing.lock")
    (tmp_path / "new.toml").write_text(INTENT)
    with pytest.raises(
        ConfigError, match=r"new\.lock: lock not found; run `baseline lock` to write it from .*new\.toml$"
    ):
        load_lock(tmp_path / "new.lock")
