"""Issue 33: integer and boolean ops computed in the graph, judged by the nodes that compiled
inside real exports (`data/op_support/exports-2.5.0.json`), and the rules those exports narrowed
or confirmed."""

from __future__ import annotations

import fnmatch
import json
import re
from importlib import resources
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from baseline.static_check import check_model
from baseline.static_check.evidence import REAL_EXPORT, RULES
from baseline.static_check.measured import exported_nodes
from tests.test_static_check_rules import errors, model, weights

FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64
TARGETS = (("rk3588", False), ("rk3566", False), ("rv1106", True))


def exports_table() -> dict[str, object]:
    resource = resources.files("baseline").joinpath("data/op_support/exports-2.5.0.json")
    table: dict[str, object] = json.loads(resource.read_text(encoding="utf-8"))
    return table


def test_every_entry_names_the_exports_it_rests_on() -> None:
    table = exports_table()
    probes, nodes = table["probes"], table["nodes"]
    assert isinstance(probes, dict) and isinstance(nodes, list) and len(probes) >= 40
    for entry in nodes:
        assert entry["probes"] and entry["targets"], entry
        for target in entry["targets"]:  # cleared on a target only where one of its probes compiled
            assert any(probes[probe][target] == "compiles" for probe in entry["probes"]), (entry, target)
    # two opsets of each torch-export probe (bench/qdq_probes.py's are checked in
    # test_static_check_prequantized: the version converter cannot take every model down to 13)
    stems = {re.sub(r"_op\d+$", "", name) for name in probes if name.startswith("ints_")}
    assert all({f"{stem}_op13", f"{stem}_op17"} <= set(probes) for stem in stems)


def test_the_export_probes_rules_cite_were_converted() -> None:
    """Every ints_* probe a real-export rule cites is in the table, with its labels."""
    probes = exports_table()["probes"]
    assert isinstance(probes, dict)
    cited = [
        pattern
        for entry in RULES.values()
        if entry.kind == REAL_EXPORT
        for pattern in re.findall(r"ints_[a-z0-9_*]+", entry.cites)
    ]
    assert cited
    for pattern in cited:
        assert fnmatch.filter(probes, pattern if pattern.endswith("*") else pattern + "*"), pattern


def integer_graph(tmp_path: Path, float_output: bool = True) -> Path:
    """int64 ids squeezed, cumulated and clamped (both bounds), then cast to float: patterns no
    single-op model built with a computed input, all inside torch exports that compiled."""
    nodes = [
        helper.make_node("Squeeze", ["x", "axis"], ["flat"]),
        helper.make_node("CumSum", ["flat", "last"], ["running"]),
        helper.make_node("Clip", ["running", "lo", "hi"], ["kept"]),
        helper.make_node("Cast", ["kept"], ["y"], to=FLOAT if float_output else TensorProto.INT32),
    ]
    constants: dict[str, np.ndarray] = {
        "axis": np.array([1], np.int64),
        "last": np.array(-1, np.int32),  # as torch writes the axis
        "lo": np.array(0, np.int64),
        "hi": np.array(7, np.int64),
    }
    return model(
        tmp_path,
        nodes,
        {"x": [1, 1, 8]},
        constants,
        opset=13,
        input_type=INT64,
        output_type=FLOAT if float_output else TensorProto.INT32,
        name=f"ints-{float_output}.onnx",
    )


def test_integer_ops_real_exports_compiled_are_judged(tmp_path: Path) -> None:
    path = integer_graph(tmp_path)
    for target, quantized in TARGETS:
        report = check_model(path, target=target, quantized=quantized)
        assert report.verdict == "compiles", (target, [f.line() for f in report.findings])
    # what no export measured stays unknown: an int64 → int16 Cast
    narrow = model(
        tmp_path,
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT16)],
        {"x": [1, 8]},
        opset=13,
        input_type=INT64,
        output_type=TensorProto.INT16,
        name="int16.onnx",
    )
    assert check_model(narrow).verdict == "unknown"


def test_a_quantized_target_clears_them_only_with_a_float_output(tmp_path: Path) -> None:
    """Every torch probe had a float output; rv1106's quantizer aborts on a graph with no float
    tensor at all (this very chain, r13_integer_only_cumsum: "Can not find quantize
    information"), so without one the entries do not apply and the graph fails there."""
    assert ("CumSum", ("int32", "int32", "int32")) in exported_nodes("2.5.0")
    ints_out = integer_graph(tmp_path, float_output=False)
    assert check_model(ints_out, target="rk3588").verdict == "compiles"
    report = check_model(ints_out, target="rv1106", quantized=True)
    assert report.verdict == "fails" and "quantized-integer-only" in {f.rule for f in report.errors()}


def test_a_scalar_computed_in_the_graph_is_not_a_scalar_input(tmp_path: Path) -> None:
    """x / max|x|: torch exports of 0-d scalars computed inside compile on rv1106; a 0-d graph
    input does not (torch_scalar_input_op13/17)."""
    nodes = [
        helper.make_node("Abs", ["x"], ["a"]),
        helper.make_node("ReduceMax", ["a"], ["m"], keepdims=0),
        helper.make_node("Div", ["x", "m"], ["y"]),
    ]
    computed = model(tmp_path, nodes, {"x": [1, 3, 8, 8]}, opset=13, name="norm.onnx")
    assert "quantized-scalar-input" not in errors(computed, target="rv1106", quantized=True)
    gain = model(
        tmp_path, [helper.make_node("Mul", ["x", "g"], ["y"])], {"x": [1, 8], "g": []}, name="gain.onnx"
    )
    assert "quantized-scalar-input" in errors(gain, target="rv1106", quantized=True)


def test_a_computed_tensor_cast_to_uint8_fails_everywhere(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Sigmoid", ["x"], ["s"]),
        helper.make_node("Cast", ["s"], ["y"], to=TensorProto.UINT8),
    ]
    path = model(tmp_path, nodes, {"x": [1, 8]}, opset=13, output_type=TensorProto.UINT8)
    for target, quantized in TARGETS:
        report = check_model(path, target=target, quantized=quantized)
        assert "cast-to-uint8" in {f.rule for f in report.errors()} and report.verdict == "fails"
    # a constant cast to uint8 folds: not this rule
    folded = model(
        tmp_path,
        [
            helper.make_node("Cast", ["c"], ["b"], to=TensorProto.UINT8),
            helper.make_node("Cast", ["b"], ["f"], to=FLOAT),
            helper.make_node("Add", ["x", "f"], ["y"]),
        ],
        {"x": [1, 8]},
        {"c": np.ones(8, np.float32)},
        opset=13,
        name="folded.onnx",
    )
    assert "cast-to-uint8" not in errors(folded)


def distance_bias(tmp_path: Path, fill: float) -> Path:
    """Scores plus an attention bias gathered from a [13, 8] table by int64 distances, the
    table's row 0 (padding) `fill`."""
    table = weights(13, 8)
    table[0] = fill
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["table", "d"], ["bias"]),
            helper.make_node("Add", ["x", "bias"], ["y"]),
        ],
        "bias",
        [
            helper.make_tensor_value_info("x", FLOAT, [1, 8, 8]),
            helper.make_tensor_value_info("d", INT64, [1, 8]),
        ],
        [helper.make_tensor_value_info("y", FLOAT, [1, 8, 8])],
        [numpy_helper.from_array(table, "table")],
    )
    path = tmp_path / f"table-{fill}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def test_a_table_holding_minus_infinity_fails_the_quantized_build(tmp_path: Path) -> None:
    """chython-rxnmap's spatial encoder (bisected) and its torch-export copy: NaN in rv1106's
    quantizer; -1e4 compiles, and rk3588 builds either."""
    infinite = distance_bias(tmp_path, float("-inf"))
    report = check_model(infinite, target="rv1106", quantized=True)
    assert "quantized-nonfinite-constant" in {f.rule for f in report.errors()} and report.verdict == "fails"
    assert "quantized-nonfinite-constant" not in errors(infinite, target="rk3588")
    finite = distance_bias(tmp_path, -1e4)
    assert "quantized-nonfinite-constant" not in errors(finite, target="rv1106", quantized=True)
    # a -inf scalar as masked_fill's value compiles (ints_infinite_mask_op*, ints_additive_inf_*)
    fill = model(
        tmp_path,
        [
            helper.make_node("Greater", ["x", "zero"], ["mask"]),
            helper.make_node("Where", ["mask", "x", "fill"], ["y"]),
        ],
        {"x": [1, 8, 4]},
        {"zero": np.array(0, np.float32), "fill": np.array(float("-inf"), np.float32)},
        opset=13,
        name="fill.onnx",
    )
    assert "quantized-nonfinite-constant" not in errors(fill, target="rv1106", quantized=True)


def masked_mean(tmp_path: Path, clamped: bool) -> Path:
    """(x * m).sum(1) / m.sum(1) over an int64 mask, the count clamped or not."""
    nodes = [
        helper.make_node("Unsqueeze", ["mask", "last"], ["m3"]),
        helper.make_node("Cast", ["m3"], ["weights"], to=FLOAT),
        helper.make_node("ReduceSum", ["weights", "steps"], ["count"], keepdims=0),
        helper.make_node("Mul", ["x", "weights"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "steps"], ["total"], keepdims=0),
    ]
    if clamped:
        nodes.append(helper.make_node("Clip", ["count", "tiny"], ["kept"]))
    nodes.append(helper.make_node("Div", ["total", "kept" if clamped else "count"], ["y"]))
    graph = helper.make_graph(
        nodes,
        "mean",
        [
            helper.make_tensor_value_info("x", FLOAT, [1, 16, 8]),
            helper.make_tensor_value_info("mask", INT64, [1, 16]),
        ],
        [helper.make_tensor_value_info("y", FLOAT, [1, 8])],
        [
            numpy_helper.from_array(np.array([-1], np.int64), "last"),
            numpy_helper.from_array(np.array([1], np.int64), "steps"),
            numpy_helper.from_array(np.array(1e-9, np.float32), "tiny"),
        ],
    )
    path = tmp_path / f"mean-{clamped}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def test_an_unguarded_count_divisor_is_unknown_on_the_quantized_target(tmp_path: Path) -> None:
    """A zero mask in the calibration data gives 0 / 0 (ints_masked_mean_op13/17 fail rv1106,
    clamped they compile): the build depends on the data, so unknown, never "fails"."""
    report = check_model(masked_mean(tmp_path, clamped=False), target="rv1106", quantized=True)
    assert "quantized-integer-divisor" in {f.rule for f in report.findings if f.unknown}
    assert report.verdict == "unknown" and "depend(s) on the calibration data" in report.reason
    assert "not measured" not in report.reason
    assert "quantized-integer-divisor" not in {
        f.rule
        for f in check_model(masked_mean(tmp_path, clamped=True), target="rv1106", quantized=True).findings
    }
    assert "quantized-integer-divisor" not in {
        f.rule for f in check_model(masked_mean(tmp_path, clamped=False), target="rk3588").findings
    }
