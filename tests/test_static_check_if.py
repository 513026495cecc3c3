"""Issue 33, the twelfth round's one miss (after its score): an If whose condition comes from
tensor shapes, as torch writes `squeeze(dim)` on a dynamically sized map. The toolkit folds it:
real exports compile when another output does not read it (its outputs dropped), and fail when
every output does (`bench/export_probes.py torch_if_squeeze_*`, `bench/rule_probes.py if_cond`);
an If on a data-dependent condition, an initializer or a Constant node fails."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from baseline.static_check import check_model
from baseline.static_check.evidence import REAL_EXPORT, evidence


def branch(op: str, name: str) -> onnx.GraphProto:
    """A one-node branch reading the outer `r`; Squeeze drops axis 1 as torch's does."""
    inputs, inits = ["r"], []
    if op == "Squeeze":
        inputs.append(f"{name}_axes")
        inits.append(numpy_helper.from_array(np.array([1], np.int64), f"{name}_axes"))
    output = helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, None)
    return helper.make_graph([helper.make_node(op, inputs, [f"{name}_y"])], name, [], [output], inits)


def if_model(tmp_path: Path, condition: str, second_output: bool, reader: str = "Sigmoid") -> Path:
    """x → Relu (r) → If(condition) → Sigmoid (y); `second_output` adds z = Neg(r); `reader`
    "GRU" reads the If's [1, 8, 8] as 1 step of 8 rows with a state input `h`, as VADs do."""
    nodes = [helper.make_node("Relu", ["x"], ["r"])]
    inits = [numpy_helper.from_array(np.array(1, np.int64), "one")]
    if condition == "shape":
        nodes += [
            helper.make_node("Shape", ["r"], ["shape"]),
            helper.make_node("Gather", ["shape", "one"], ["channels"], axis=0),
            helper.make_node("Equal", ["channels", "one"], ["cond"]),
        ]
    elif condition == "data":
        nodes += [
            helper.make_node("ReduceMean", ["r"], ["mean"], keepdims=0),
            helper.make_node("Greater", ["mean", "zero"], ["cond"]),
        ]
        inits.append(numpy_helper.from_array(np.array(0.0, np.float32), "zero"))
    else:
        inits.append(numpy_helper.from_array(np.array(True), "cond"))
    then, other = branch("Squeeze", "then"), branch("Identity", "else")
    nodes.append(helper.make_node("If", ["cond"], ["chosen"], then_branch=then, else_branch=other))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])]
    if reader == "GRU":
        rng = np.random.default_rng(0)
        inits += [
            numpy_helper.from_array(rng.standard_normal((1, 12, 8)).astype(np.float32), "w"),
            numpy_helper.from_array(rng.standard_normal((1, 12, 4)).astype(np.float32), "rw"),
        ]
        inputs.append(helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, 8, 4]))
        nodes.append(helper.make_node("GRU", ["chosen", "w", "rw", "", "", "h"], ["y"], hidden_size=4))
    else:
        nodes.append(helper.make_node(reader, ["chosen"], ["y"]))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if second_output:
        nodes.append(helper.make_node("Neg", ["r"], ["z"]))
        outputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 1, 8, 8]))
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    path = tmp_path / f"if_{condition}_{second_output}_{reader}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


@pytest.mark.parametrize("target", ["rk3588", "rk3566", "rv1106"])
def test_an_if_on_a_shape_beside_another_output_is_left_to_the_compiler(tmp_path: Path, target: str) -> None:
    report = check_model(if_model(tmp_path, "shape", second_output=True), target=target)
    rules = {f.rule: f for f in report.findings}
    assert "data-dependent-op" not in rules and "constant-outputs" not in rules
    assert report.verdict == "unknown", report.findings
    assert "measured both ways" in report.reason
    assert "the RKNN model loses output(s) ['y']" in rules["if-on-shape"].message  # not 'z


def test_an_if_on_a_shape_that_every_output_reads_folds_them_all(tmp_path: Path) -> None:
    report = check_model(if_model(tmp_path, "shape", second_output=False))
    assert report.verdict == "fails"
    assert {f.rule for f in report.errors()} == {"constant-outputs"}
    assert "reads an If the toolkit folds" in report.errors()[0].message


@pytest.mark.parametrize("condition", ["data", "initializer"])
def test_an_if_on_data_or_a_given_constant_is_still_refused(tmp_path: Path, condition: str) -> None:
    report = check_model(if_model(tmp_path, condition, second_output=True))
    assert "data-dependent-op" in {f.rule for f in report.errors()}
    assert report.verdict == "fails"
    assert "if-on-shape" not in {f.rule for f in report.findings}


@pytest.mark.parametrize("target", ["rk3588", "rk3566", "rv1106"])
def test_an_if_on_a_shape_folded_into_a_recurrent_node_fails(tmp_path: Path, target: str) -> None:
    """silero VAD v3 and akiki-vad: the folded If feeds an LSTM / GRU through folded nodes."""
    report = check_model(if_model(tmp_path, "shape", second_output=True, reader="GRU"), target=target)
    assert report.verdict == "fails"
    decisive = [f for f in report.errors() if f.decisive]
    assert [f.rule for f in decisive] == ["if-into-recurrent"]
    assert "the GRU" in decisive[0].message and "onnxsim" in decisive[0].remedy


def test_a_recurrent_node_not_fed_by_the_if_is_not_blamed_on_it(tmp_path: Path) -> None:
    path = if_model(tmp_path, "data", second_output=True, reader="GRU")
    assert "if-into-recurrent" not in {f.rule for f in check_model(path).findings}


@pytest.mark.parametrize(
    ("rule", "cited"), [("if-on-shape", "table_grid_model_v1"), ("if-into-recurrent", "silero")]
)
def test_the_rules_cite_the_real_exports(rule: str, cited: str) -> None:
    entry = evidence(rule)
    assert entry.kind == REAL_EXPORT
    assert "torch_if_squeeze" in entry.cites and cited in entry.cites
