"""Issue 33: the seventh round's one Scan model (typeseg's Mamba) failed on every target; cut to
generated running-sum Scans (`bench/rule_probes.py scan`), the failure is a body that reads a
tensor of the outer graph."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from baseline.static_check import check_model
from baseline.static_check.evidence import REAL_EXPORT, evidence


def running_sum(tmp_path: Path, gain: str) -> Path:
    """Scan over 8 steps of a [8, 4] input, summing each step scaled by `gain`: "none", "outer" (a
    constant of the outer graph, as the Mamba's A and D) or "inner" (a Constant node of the body)."""
    body_nodes = []
    if gain == "inner":
        value = numpy_helper.from_array(np.full(4, 0.5, np.float32), "v")
        body_nodes.append(helper.make_node("Constant", [], ["gain"], value=value))
    if gain != "none":
        body_nodes.append(helper.make_node("Mul", ["x_t", "gain"], ["g"]))
    body_nodes += [
        helper.make_node("Add", ["state_in", "x_t" if gain == "none" else "g"], ["state_out"]),
        helper.make_node("Identity", ["state_out"], ["y_t"]),
    ]
    vector = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4]) for n in ("state_in", "x_t")]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4]) for n in ("state_out", "y_t")]
    body = helper.make_graph(body_nodes, "body", vector, outs)
    constants = [numpy_helper.from_array(np.zeros(4, np.float32), "zeros")]
    if gain == "outer":
        constants.append(numpy_helper.from_array(np.full(4, 0.5, np.float32), "gain"))
    nodes = [
        helper.make_node("Scan", ["zeros", "x"], ["final", "steps"], body=body, num_scan_inputs=1),
        helper.make_node("Relu", ["steps"], ["y"]),
        helper.make_node("Relu", ["final"], ["f"]),
    ]
    graph = helper.make_graph(
        nodes,
        "scan",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 4])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "f")],
        constants,
    )
    path = tmp_path / f"scan_{gain}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def test_a_scan_body_reading_the_outer_graph_fails_every_target(tmp_path: Path) -> None:
    outer = running_sum(tmp_path, "outer")
    for target, quantized in (("rk3588", False), ("rk3566", False), ("rv1106", True)):
        report = check_model(outer, target=target, quantized=quantized)
        finding = next(f for f in report.errors() if f.rule == "scan-outer-scope")
        assert report.verdict == "fails" and "'gain'" in finding.message and "Constant node" in finding.remedy
    # self-contained bodies compiled on every target (scan_sum_*, scan_inner_*): no rule
    for gain in ("none", "inner"):
        report = check_model(running_sum(tmp_path, gain), target="rk3588", quantized=False)
        assert all(f.rule != "scan-outer-scope" for f in report.findings)
    assert evidence("scan-outer-scope").kind == REAL_EXPORT
