"""Issue 14, item 12: a damaged toolkit environment is named as such, with how to rebuild it,
instead of being reported as a crash of each model with an empty log.

The environments here are fakes (an interpreter without rknn, or none that runs): they reach
`ToolkitWorker.start`, hence the toolkit mark, but never the real toolkit."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from baseline.errors import EnvironmentBroken
from baseline.toolchain import provision
from baseline.toolchain.client import ToolkitWorker
from baseline.toolchain.provision import MARKER, environment_dir, find_toolchain
from tests.test_trust import assert_refused

pytestmark = pytest.mark.toolkit


@pytest.fixture
def broken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A complete-looking 2.5.0 environment whose Python has no rknn package."""
    monkeypatch.setenv(provision.CACHE_ENV, str(tmp_path / "toolchains"))
    path = environment_dir("2.5.0")
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "python").symlink_to(sys.executable)
    marker = {"version": "2.5.0", "python": "3.11.7", "packages": {"rknn-toolkit2": "2.5.0"}}
    (path / MARKER).write_text(json.dumps(marker))
    return path


def test_an_environment_without_rknn_is_damaged_with_the_fix(broken: Path) -> None:
    toolchain = find_toolchain("2.5.0")
    assert toolchain is not None
    with pytest.raises(EnvironmentBroken) as raised:
        ToolkitWorker(toolchain).start()
    message = str(raised.value)
    assert str(broken) in message and "is damaged" in message
    assert "No module named 'rknn'" in message
    assert "baseline toolchain install --force 2.5.0" in message


def test_an_interpreter_that_cannot_run_is_damaged(broken: Path) -> None:
    python = broken / "bin" / "python"
    python.unlink()
    python.write_text("not a program")  # exists, so the environment is found, but cannot run
    toolchain = find_toolchain("2.5.0")
    assert toolchain is not None
    with pytest.raises(EnvironmentBroken, match="cannot run .*python: Permission denied"):
        ToolkitWorker(toolchain).start()


def test_lock_stops_in_one_line_naming_the_environment(broken: Path, tmp_path: Path, cli) -> None:
    root = tmp_path / "project"
    (root / "models").mkdir(parents=True)
    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in "xy")
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, root / "models" / "relu.onnx")
    (root / "baseline.toml").write_text('[[models]]\nname = "relu"\nonnx = "models/relu.onnx"\n')
    code, out, err = cli(root, "lock")
    assert_refused(code, out, err, "is damaged", "No module named 'rknn'", "install --force 2.5.0")
    assert not (root / "baseline.lock").exists()
