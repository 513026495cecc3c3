"""A model's external data (weights beside the `.onnx`) is pinned like the model: a pull request
that changes only those bytes is seen by integrity, reruns what reads them, and shows in diff."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from baseline.project.lockfile import load_lock

CLI = Callable[..., tuple[int, str, str]]

INTENT = """[[models]]
name = "dense"
onnx = "models/dense.onnx"
backends = ["onnxruntime"]
targets = []
"""


def project(root: Path) -> Path:
    weight = numpy_helper.from_array(np.ones((64, 8), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "dense",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    (root / "models").mkdir(parents=True)
    onnx.save(model, str(root / "models" / "dense.onnx"), save_as_external_data=True,
              location="dense.onnx.data", size_threshold=0)  # fmt: skip
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (root / "baseline.toml").write_text(INTENT)
    return root


def test_changed_external_weights_fail_integrity_even_from_the_cache(tmp_path: Path, cli: CLI) -> None:
    root = project(tmp_path)
    assert cli(root, "lock")[0] == 0
    model = load_lock(root / "baseline.lock").model("dense")
    assert model is not None and [pin.path for pin in model.onnx.external or []] == ["models/dense.onnx.data"]
    assert cli(root, "verify")[0] == 0  # fills the cache
    weights = root / "models" / "dense.onnx.data"
    data = bytearray(weights.read_bytes())
    data[0] ^= 0x01  # one weight changes; the .onnx does not
    weights.write_bytes(bytes(data))
    code, out, _ = cli(root, "verify", "--format", "json")
    failing = {r["gate"] for r in json.loads(out)["results"] if r["status"] == "fail"}
    assert code == 1 and "integrity" in failing, out
    code, out, _ = cli(root, "lock", "--check")
    assert code == 1 and "onnx.external.models/dense.onnx.data" in out, out
