"""Issue 33, session 16: a tensor that `value_info` declares more than once with different dims
(the ninth round's dynamic-axes YOLO11n, `KeyError: dtype('<U182')` on every target), and an
ai.onnx.ml Scaler read by another node (skl2onnx's StandardScaler before a model)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from baseline.static_check import check_model
from tests.test_static_check_rules import toolkit_compiles

FLOAT = TensorProto.FLOAT


def neck(tmp_path: Path, conflict: bool) -> Path:
    """A stride-2 Conv upsampled back and joined to its input, its value_info naming each
    tensor twice as Ultralytics' dynamic exports do: the same dims twice, or (`conflict`) the
    upsampled branch's second entry with another height expression."""
    image = helper.make_tensor_value_info("images", FLOAT, [1, 8, 16, 16])
    nodes = [
        helper.make_node("Conv", ["images", "w"], ["down"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Resize", ["down", "", "scales"], ["up"], mode="nearest"),
        helper.make_node("Concat", ["images", "up"], ["y"], axis=1),
    ]
    constants = [
        numpy_helper.from_array(np.full([8, 8, 3, 3], 0.01, np.float32), "w"),
        numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
    ]
    second = "floor(2.0*(((height - 1)//2) + 1) + 1/2)" if conflict else "height"
    value_info = [
        helper.make_tensor_value_info("up", FLOAT, ["batch", 8, "height", "width"]),
        helper.make_tensor_value_info("up", FLOAT, ["batch", 8, second, "width"]),
    ]
    output = helper.make_tensor_value_info("y", FLOAT, [1, 16, 16, 16])
    graph = helper.make_graph(nodes, "neck", [image], [output], constants, value_info=value_info)
    path = tmp_path / f"neck-{conflict}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def test_value_info_naming_a_tensor_twice_with_different_dims_is_unknown(tmp_path: Path) -> None:
    """Not "compiles" (the YOLO11n failed so on every target), not "fails" either: the
    bisection did not isolate what in the entries the toolkit trips on (a generated graph with
    conflicting entries, as this one, compiles)."""
    for target in ("rk3588", "rk3566", "rv1106"):
        report = check_model(neck(tmp_path, conflict=True), target=target)
        finding = next(f for f in report.errors() if f.rule == "conflicting-value-info")
        assert "1 tensor(s)" in finding.message and "'up'" in finding.message
        assert "value_info" in finding.remedy
        assert report.verdict == "unknown" and "conflicting-value-info" in report.reason


def test_the_same_dims_declared_twice_are_no_finding(tmp_path: Path) -> None:
    """A static Ultralytics export writes its duplicates with equal dims and compiles (the seventh
    round's fall-detection YOLOv8, 241 tensors named twice, compiled on every target)."""
    report = check_model(neck(tmp_path, conflict=False))
    assert "conflicting-value-info" not in {f.rule for f in report.findings}
    assert report.verdict == "compiles"


def scaler_model(tmp_path: Path, read: bool) -> Path:
    """skl2onnx's StandardScaler → MLPRegressor head (Scaler → Cast → MatMul → Add), or the
    Scaler alone as the graph output."""
    scaler = helper.make_node(
        "Scaler", ["x"], ["scaled"], domain="ai.onnx.ml", offset=[0.5] * 4, scale=[2.0] * 4
    )
    nodes = [scaler]
    constants = []
    if read:
        nodes += [
            helper.make_node("Cast", ["scaled"], ["cast"], to=FLOAT),
            helper.make_node("MatMul", ["cast", "w"], ["mm"]),
            helper.make_node("Add", ["mm", "b"], ["y"]),
        ]
        constants = [
            numpy_helper.from_array(np.full([4, 8], 0.1, np.float32), "w"),
            numpy_helper.from_array(np.zeros([8], np.float32), "b"),
        ]
    output = helper.make_tensor_value_info("y" if read else "scaled", FLOAT, [1, 8] if read else [1, 4])
    graph = helper.make_graph(
        nodes, "skl", [helper.make_tensor_value_info("x", FLOAT, [1, 4])], [output], constants
    )
    opsets = [helper.make_opsetid("", 12), helper.make_opsetid("ai.onnx.ml", 1)]
    path = tmp_path / f"scaler-{read}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=opsets, ir_version=7), path)
    return path


def test_a_scaler_read_by_another_node_fails_on_every_target(tmp_path: Path) -> None:
    for target in ("rk3588", "rk3566", "rv1106"):
        report = check_model(scaler_model(tmp_path, read=True), target=target)
        assert "ml-scaler-read" in {f.rule for f in report.errors()} and report.verdict == "fails"
    # the Scaler as the graph output is not this rule's (it compiled on rk3588 / rk3566)
    alone = check_model(scaler_model(tmp_path, read=False), target="rk3588")
    assert "ml-scaler-read" not in {f.rule for f in alone.findings} and alone.verdict == "compiles"


@pytest.mark.toolkit
def test_toolkit_fails_a_read_scaler_and_compiles_the_rest(tmp_path: Path) -> None:
    assert not toolkit_compiles(scaler_model(tmp_path, read=True))
    assert toolkit_compiles(scaler_model(tmp_path, read=False))
