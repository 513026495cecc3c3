"""Rules for failures the measured table alone does not pin to a cause: each names the
single-op models (or the toolkit message) it comes from, and fires on the pattern that failed
only. One rule per function; `known_failures` runs them on one node.
"""

from __future__ import annotations

import onnx
from onnx import TensorProto, numpy_helper

from baseline.static_check.findings import StaticFinding
from baseline.static_check.graph import GraphFacts

INTEGER = {
    TensorProto.INT8,
    TensorProto.UINT8,
    TensorProto.INT16,
    TensorProto.UINT16,
    TensorProto.INT32,
    TensorProto.UINT32,
    TensorProto.INT64,
    TensorProto.UINT64,
}
# Inputs that are parameters, not data: given as graph-computed tensors the compiler crashes
# or the toolkit cannot fold them (measured as tested vs frozen in baseline/data/op_support).
PARAMETER_INPUTS = {
    "BatchNormalization": (1, 2, 3, 4),  # test_batchnorm_{example,epsilon}: SIGSEGV; frozen compiles
    "Clip": (1, 2),  # test_clip_{example,inbounds,...}: onnxruntime RUNTIME_EXCEPTION; frozen compiles
    "PRelu": (1,),  # test_prelu_{example,broadcast}: "'NoneType' object has no attribute 'shape'"
}
RECURRENT = {"LSTM", "GRU", "RNN"}
# Computed parameters whose torch exports fail as the node tests do (bench/export_probes.py)
EXPORTED_PARAMETERS = {
    "PRelu": "; torch.onnx.export of F.prelu with a slope computed from the input fails too "
    "(opsets 11, 13, 17, every target: torch_prelu_computed_op*)",
    "BatchNormalization": "; torch.onnx.export of F.batch_norm in eval mode with this batch's "
    "mean and variance is killed by SIGSEGV too (opsets 13, 17, every target: "
    "ints_computed_batchnorm_op*)",
}


# onnxruntime's QOperator format in the standard domain (its QLinearAdd, QGemm ... are in
# com.microsoft, refused as such): the position of the constant weights
QOPERATOR = {"QLinearConv": 3, "QLinearMatMul": 3}


# The ai.onnx.ml tree ensembles skl2onnx writes (opsets 12 and 19, ai.onnx.ml 1 and 3)
ML_TREE_ENSEMBLES = {"TreeEnsembleClassifier", "TreeEnsembleRegressor"}


# Every op type a rule below looks at (besides float64_dtype_attribute, which looks at any op
# with a `dtype` attribute): other nodes skip the rules, ~1/10 of a 500-node check's rule time.
RULE_OPS = {
    *PARAMETER_INPUTS,
    *RECURRENT,
    "LayerNormalization",
    "ConvInteger",
    *QOPERATOR,
    "DynamicQuantizeLinear",
    "Scan",
    "ConstantOfShape",
    "Dropout",
    "AveragePool",
    "Pad",
    "ConvTranspose",
    "Gemm",
    "Max",
    "RoiAlign",
    "Split",
    "TreeEnsemble",
    *ML_TREE_ENSEMBLES,
    "Scaler",
}


def known_failures(node: onnx.NodeProto, where: str, facts: GraphFacts) -> list[StaticFinding]:
    if node.op_type not in RULE_OPS:
        return float64_dtype_attribute(node, where)
    return [
        *parameters_from_graph(node, where, facts.constant),
        *integer_clip(node, where, facts.dtypes),
        *recurrent_unnamed_output(node, where),
        *recurrent_unused_sequence(node, where, facts.consumed),
        *recurrent_layout(node, where),
        *layernorm_constant_parameters(node, where, facts.constant),
        *layernorm_of_dequantized(node, where, facts),
        *convinteger_constant_weights(node, where, facts.constant),
        *qoperator_constant_weights(node, where, facts),
        *dynamic_quantization(node, where),
        *scan_outer_scope(node, where),
        *constant_of_shape_default(node, where),
        *dropout_training_constant(node, where, facts),
        *pooling_3d_dilations(node, where, facts.ranks),
        *float64_dtype_attribute(node, where),
        *pad_axes(node, where),
        *batchnorm_training(node, where),
        *convtranspose_auto_pad(node, where),
        *gemm_scalar_bias(node, where, facts.shapes, facts.constant),
        *max_of_one(node, where),
        *roialign_max(node, where),
        *uneven_split(node, where, facts.shapes),
        *clip_both_bounds_computed(node, where, facts.constant),
        *tree_ensemble_double_splits(node, where, facts.dtypes),
        *ml_tree_ensemble(node, where),
        *ml_scaler_read(node, where, facts.readers),
    ]


def _attribute(node: onnx.NodeProto, name: str, default: object) -> object:
    for attribute in node.attribute:
        if attribute.name == name:
            return onnx.helper.get_attribute_value(attribute)
    return default


def parameters_from_graph(node: onnx.NodeProto, where: str, constant: set[str]) -> list[StaticFinding]:
    """Normalisation statistics, Clip bounds and PRelu slopes computed in the graph."""
    dynamic = [
        node.input[i]
        for i in PARAMETER_INPUTS.get(node.op_type, ())
        if i < len(node.input) and node.input[i] not in constant
    ]
    if not dynamic:
        return []
    return [
        StaticFinding(
            "parameter-not-constant",
            "error",
            where,
            f"parameter input(s) {dynamic} are computed from the graph inputs, not constants",
            "fold them into initializers (export the trained values as constants)",
            f"measured: single-op {node.op_type} models with these inputs as graph inputs fail or "
            "crash (SIGSEGV), with them frozen they compile (baseline/data/op_support)"
            + EXPORTED_PARAMETERS.get(node.op_type, ""),
            # PRelu, BatchNormalization: real exports fail the same way, so it decides; Clip
            # (torch writes computed bounds as Max / Min): node tests only, so unknown
            thin=node.op_type not in EXPORTED_PARAMETERS,
        )
    ]


def integer_clip(node: onnx.NodeProto, where: str, dtypes: dict[str, int]) -> list[StaticFinding]:
    # int64: torch.onnx.export of clamp on an ArgMax index compiles on every target at opsets
    # 12, 13, 17 (bench/export_probes.py torch_int_clip_op*); the node tests' int8 crashes
    if (
        node.op_type != "Clip"
        or not node.input
        or dtypes.get(node.input[0]) not in INTEGER - {TensorProto.INT64}
    ):
        return []
    return [
        StaticFinding(
            "integer-clip",
            "error",
            where,
            "Clip on an integer tensor crashes the compiler",
            "Cast to float32 before the Clip",
            "measured: test_clip_default_int8_{min,max,inbounds} are killed by SIGSEGV, frozen or not, "
            "and so is torch.onnx.export of an int8 clamp (opsets 13, 17, every target); an int64 "
            "clamp exported by torch compiles (bench/export_probes.py)",
            # int8: real exports crash too; other narrow integer types: node tests only (torch
            # exports an int32 clamp with int64 bounds, which onnxruntime itself rejects)
            thin=dtypes.get(node.input[0]) != TensorProto.INT8,
        )
    ]


def recurrent_unnamed_output(node: onnx.NodeProto, where: str) -> list[StaticFinding]:
    """An LSTM / GRU / RNN whose optional output Y is left unnamed (""), as opset-19 exports
    and the version converter write it: the toolkit's onnxruntime pass cannot plan it."""
    if node.op_type not in RECURRENT or "" not in node.output:
        return []
    return [
        StaticFinding(
            "recurrent-unnamed-output",
            "error",
            where,
            f"{node.op_type} with an unnamed optional output",
            "name every output of the op (export Y too, even if unused)",
            "measured: test_lstm_defaults, test_gru_defaults, test_simple_rnn_defaults (opset 19) fail "
            'with onnxruntime "allocation_planner.cc:237"; the same ops with all outputs named compile',
        )
    ]


def recurrent_unused_sequence(
    node: onnx.NodeProto, where: str, consumed: frozenset[str]
) -> list[StaticFinding]:
    """A GRU / RNN whose sequence output Y is read by nothing while its last state Y_h is: the
    toolkit drops the unread output's name and then cannot plan the graph (LSTM compiles)."""
    if node.op_type not in ("GRU", "RNN") or len(node.output) < 2 or not node.output[0]:
        return []
    if node.output[0] in consumed or node.output[1] not in consumed:
        return []
    return [
        StaticFinding(
            "recurrent-unused-sequence",
            "error",
            where,
            f"{node.op_type} whose sequence output Y is unused while Y_h is used",
            "make Y a graph output too (or read the state from Y's last step)",
            "measured: SpeechMOS plcmos_v2.onnx (second GRU) fails with \"KeyError: ''\" in build; "
            'generated GRU / RNN models with Y unused fail with onnxruntime "allocation_planner.cc:237", '
            "the same with Y read compile, LSTM compiles either way",
        )
    ]


def recurrent_layout(node: onnx.NodeProto, where: str) -> list[StaticFinding]:
    """A recurrent op that writes `layout`. The toolkit's onnx checker does not know the
    attribute on GRU / LSTM (opset 14 added it), so any value written fails, the default 0 too,
    as torch's dynamo exporter writes it; layout=1 (batch first) fails every recurrent op, in
    the onnxruntime the toolkit builds with. RNN with layout=0 written compiles."""
    layout = _attribute(node, "layout", None)
    if node.op_type not in RECURRENT or layout is None or (node.op_type == "RNN" and layout == 0):
        return []
    if layout == 0:
        problem = f"{node.op_type} writes the default layout=0, which the toolkit's checker refuses"
        fix = "drop the `layout` attribute (0 is the default; the model stays the same)"
    else:
        problem = f"{node.op_type} with layout={layout} (batch first), which the toolkit cannot build"
        fix = (
            "export batch first as a Transpose to [steps, batch, features] before the op and back "
            "after it, with layout 0 (the attribute left out)"
        )
    return [
        StaticFinding(
            "recurrent-layout",
            "error",
            where,
            problem,
            fix,
            "measured: flashvad (torch 2.13, opset 18; eighth round) fails on rk3588, rk3566 and rv1106 "
            'with "Unrecognized attribute: layout for operator GRU" and compiles with the attribute '
            "dropped; generated GRU / LSTM with layout=0 written fail the same way at opsets 14, 18, "
            'without it they compile; layout=1 fails RNN, GRU and LSTM (onnxruntime: "Batchwise '
            'recurrent operations (layout == 1) are not supported"), as test_*_batchwise '
            "(bench/rule_probes.py recurrent_layout)",
        )
    ]


def layernorm_constant_parameters(
    node: onnx.NodeProto, where: str, constant: set[str]
) -> list[StaticFinding]:
    """LayerNormalization (opset 17) with constant scale and bias and no `epsilon` attribute: the
    toolkit reads the attribute by name. torch.onnx.export always writes it, and compiles."""
    if node.op_type != "LayerNormalization" or len(node.input) < 2:
        return []
    if any(a.name == "epsilon" for a in node.attribute):
        return []
    parameters = node.input[1:3]
    if not all(name in constant for name in parameters):
        return []
    return [
        StaticFinding(
            "layernorm-constant-parameters",
            "error",
            where,
            "LayerNormalization with constant scale and bias and no epsilon attribute",
            "write epsilon explicitly (epsilon=1e-5, as torch.onnx.export does)",
            "measured: generated MatMul → LayerNormalization → Relu models without epsilon fail with "
            "\"KeyError: 'LayerNormalization'\" in build on rk3588, rk3566 and rv1106 at opsets 17 and 18, "
            "as do the frozen test_layer_normalization_2d_axis0 / _axis1; the same with epsilon=1e-5, "
            "and torch.onnx.export of nn.LayerNorm (opsets 17, 18), compile (bench/export_probes.py)",
        )
    ]


def layernorm_of_dequantized(node: onnx.NodeProto, where: str, facts: GraphFacts) -> list[StaticFinding]:
    """LayerNormalization of a DequantizeLinear output: a QDQ-quantized transformer. The one
    real such model converted crashed; the cause is not isolated, so this only makes the
    verdict unknown (`evidence`: unisolated)."""
    if node.op_type != "LayerNormalization" or not node.input:
        return []
    if facts.producer_op(node.input[0]) != "DequantizeLinear":
        return []
    return [
        StaticFinding(
            "layernorm-of-dequantized",
            "error",
            where,
            "LayerNormalization of a dequantized (QDQ) tensor: such models crashed or did not finish",
            "convert the float model and let the toolkit quantize it, or convert it for real to know",
            "measured: pipecat smart-turn v3.2 (a QDQ Whisper encoder, LayerNormalization with epsilon) "
            "is killed by SIGSEGV on rk3588 and rk3566; onnxruntime quantize_static QDQ copies of "
            "torch-exported nn.LayerNorm and attention did not finish within minutes on rk3588 (the "
            "toolkit printing blank lines); QDQ Convs compile. The cause is not isolated",
        )
    ]


def convinteger_constant_weights(node: onnx.NodeProto, where: str, constant: set[str]) -> list[StaticFinding]:
    """ConvInteger with constant weights and a constant input zero point (static quantization)."""
    if node.op_type != "ConvInteger" or len(node.input) < 2:
        return []
    if not all(name in constant for name in node.input[1:3]):  # an absent zero point ("") is 0
        return []
    return [
        StaticFinding(
            "convinteger-constant-weights",
            "error",
            where,
            "ConvInteger with constant weights and input zero point (or none) crashes the compiler",
            "quantize with QDQ (QuantizeLinear / DequantizeLinear around a float Conv) instead",
            "measured: frozen test_convinteger_without_padding and generated ConvIntegers (with and "
            "without a zero point) are killed by SIGSEGV; with the weights or the zero point a graph "
            "input they compile",
        )
    ]


def qoperator_constant_weights(node: onnx.NodeProto, where: str, facts: GraphFacts) -> list[StaticFinding]:
    """QLinearConv / QLinearMatMul with constant weights reading a QuantizeLinear output: onnxruntime's
    QOperator format. Every real QOperator model failed; the frozen node tests (a quantized graph
    input, constant weights) compile on rk3588, so a QLinear op reading a graph input is left to
    the op table."""
    position = QOPERATOR.get(node.op_type)
    if position is None or len(node.input) <= position or node.input[position] not in facts.constant:
        return []
    if facts.producer_op(node.input[0]) != "QuantizeLinear":
        return []
    return [
        StaticFinding(
            "qoperator-constant-weights",
            "error",
            where,
            f"{node.op_type} of a QuantizeLinear output with constant weights (onnxruntime's QOperator "
            "format) fails to convert",
            "give the toolkit the float model (it quantizes itself); on rk3588 / rk3566 a QDQ model "
            "(quantize_static with QuantFormat.QDQ) built with do_quantization=False compiles",
            "measured: onnxruntime quantize_static in QOperator format of real models (an MNIST CNN, "
            "a residual block, a MobileNetV3 classifier, a VAD CNN, an MLP; opsets 13, 17; "
            "bench/qdq_probes.py): with only the Convs quantized (QLinearConv) shape inference "
            'fails ("Inferred elem type differs") on rk3588 and rk3566, whole models "\'NoneType\' '
            "object is not iterable\"; a MatMul's QLinearMatMul fails too (bench/rule_probes.py "
            "ort_quantized); rv1106 refuses them all (a quantized build of a quantized model). The "
            "frozen node tests, reading a quantized graph input, compile on rk3588",
        )
    ]


def dynamic_quantization(node: onnx.NodeProto, where: str) -> list[StaticFinding]:
    """DynamicQuantizeLinear: onnxruntime's quantize_dynamic, refused by name on every target."""
    if node.op_type != "DynamicQuantizeLinear":
        return []
    return [
        StaticFinding(
            "dynamic-quantization",
            "error",
            where,
            "DynamicQuantizeLinear (onnxruntime quantize_dynamic): the toolkit refuses it as "
            "making the graph dynamic",
            "give the toolkit the float model (it quantizes itself); on rk3588 / rk3566 a QDQ model "
            "(quantize_static with QuantFormat.QDQ) built with do_quantization=False compiles",
            "measured: quantize_dynamic of real models (MNIST CNN, VAD CNN, MLP; opsets 13, 17; "
            'bench/qdq_probes.py) fails on rk3588, rk3566 and rv1106: "The DynamicQuantizeLinear(...) '
            'will cause the graph to be a dynamic graph!"',
        )
    ]


def _outer_names(body: onnx.GraphProto) -> list[str]:
    """Tensors the body's nodes read that the body does not define (its inputs, initializers,
    node outputs): names of the enclosing graph."""
    defined = {v.name for v in body.input} | {t.name for t in body.initializer}
    outer = []
    for node in body.node:
        outer += [name for name in node.input if name and name not in defined and name not in outer]
        defined.update(node.output)
    return outer


def scan_outer_scope(node: onnx.NodeProto, where: str) -> list[StaticFinding]:
    """A Scan whose body reads a tensor of the outer graph: the toolkit's loader does not find it
    ("is not output of any previous nodes"); a self-contained body compiles."""
    if node.op_type != "Scan":
        return []
    body = next((a.g for a in node.attribute if a.name == "body"), None)
    outer = _outer_names(body) if body is not None else []
    if not outer:
        return []
    return [
        StaticFinding(
            "scan-outer-scope",
            "error",
            where,
            f"the Scan body reads {outer[0]!r}"
            + (f" (+{len(outer) - 1} more)" if len(outer) > 1 else "")
            + ' from the outer graph: the toolkit\'s loader fails ("is not output of any previous nodes")',
            "make the body self-contained: a constant as a Constant node inside the body (measured to "
            "compile); a computed tensor as an extra Scan input (not measured)",
            "measured: typeseg 0.2.7's mamba_al (seventh round; its selective scan reads A and D from "
            "the outer graph) fails on rk3588, rk3566, rv1106; generated running-sum Scans (opsets "
            "13, 17; bench/rule_probes.py scan) fail the same way when the body reads an outer "
            "constant, and compile with none or with it as a Constant node of the body",
        )
    ]


def constant_of_shape_default(node: onnx.NodeProto, where: str) -> list[StaticFinding]:
    """ConstantOfShape relying on its default value (float 0): the toolkit's loader reads the
    absent attribute as an array and fails."""
    if node.op_type != "ConstantOfShape" or any(a.name == "value" for a in node.attribute):
        return []
    return [
        StaticFinding(
            "constant-of-shape-default",
            "error",
            where,
            "ConstantOfShape without a value attribute",
            "give the value explicitly (value=tensor([0.0]))",
            'measured: generated ConstantOfShape + Add fails in load with "AttributeError: '
            "'numpy.ndarray' object has no attribute 'data_type'\"; with value=0 it compiles; so "
            "does the swift-f0 pitch tracker as shipped, and with value=0.0 written it loads",
        )
    ]


def dropout_training_constant(node: onnx.NodeProto, where: str, facts: GraphFacts) -> list[StaticFinding]:
    """Dropout whose training_mode input is a constant true (or a constant baseline cannot read)."""
    if node.op_type != "Dropout" or len(node.input) < 3 or node.input[2] not in facts.constant:
        return []
    value = facts.values.get(node.input[2])
    if not node.input[2] or (value is not None and not numpy_helper.to_array(value).any()):
        return []
    return [
        StaticFinding(
            "dropout-training-mode",
            "error",
            where,
            "Dropout with training_mode set to a constant true crashes the compiler",
            "export in eval mode (model.eval()): Dropout then drops out of the graph",
            "measured: frozen test_training_dropout and generated Dropouts (ratio 0, 0.5, 0.75, with "
            "and without the mask) are killed by SIGABRT, and so is torch.onnx.export in training "
            "mode of a Linear and nn.Dropout (opsets 13, 17, every target); training_mode false or "
            "absent compiles",
        )
    ]


def pooling_3d_dilations(node: onnx.NodeProto, where: str, ranks: dict[str, int]) -> list[StaticFinding]:
    dilations = _attribute(node, "dilations", [])
    if node.op_type != "AveragePool" or not node.input or ranks.get(node.input[0], 0) != 5:
        return []
    if not isinstance(dilations, list) or all(d == 1 for d in dilations):
        return []
    return [
        StaticFinding(
            "avgpool-3d-dilations",
            "error",
            where,
            "a 3-D AveragePool with dilations",
            "use dilations of 1 or a 2-D pool",
            "measured: test_averagepool_3d_dilations_* fail (the toolkit's rewrite fails in onnxruntime); "
            "2-D dilations compile",
        )
    ]


def float64_dtype_attribute(node: onnx.NodeProto, where: str) -> list[StaticFinding]:
    """A `dtype` attribute of double (EyeLike, Bernoulli, Random*): the toolkit turns float64
    tensors into float32 but keeps the attribute, and its onnxruntime pass rejects the graph."""
    if _attribute(node, "dtype", None) != TensorProto.DOUBLE:
        return []
    return [
        StaticFinding(
            "float64-dtype-attribute",
            "error",
            where,
            f"{node.op_type} with dtype=double (the toolkit rewrites float64 to float32, not the attribute)",
            "drop the dtype attribute (or use float) and Cast the output",
            'measured: test_eyelike_with_dtype, test_bernoulli_double fail ("Type Error: Type '
            '(tensor(float)) ... does not match expected type (tensor(double))"); without dtype they compile',
        )
    ]


def pad_axes(node: onnx.NodeProto, where: str) -> list[StaticFinding]:
    if node.op_type != "Pad" or len(node.input) < 4 or not node.input[3]:
        return []
    return [
        StaticFinding(
            "pad-axes",
            "error",
            where,
            "Pad with an axes input (opset 18)",
            "give pads for every axis and drop axes",
            'measured: test_constant_pad_axes, test_constant_pad_negative_axes raise "IndexError: list '
            'index out of range" in build, frozen or not',
        )
    ]


def batchnorm_training(node: onnx.NodeProto, where: str) -> list[StaticFinding]:
    if node.op_type != "BatchNormalization" or _attribute(node, "training_mode", 0) != 1:
        return []
    return [
        StaticFinding(
            "batchnorm-training",
            "error",
            where,
            "BatchNormalization in training mode",
            "export the model in eval mode (model.eval())",
            "measured: \"The 'y' of type BatchNormalization is in Training mode, which is not support\"",
        )
    ]


def convtranspose_auto_pad(node: onnx.NodeProto, where: str) -> list[StaticFinding]:
    if node.op_type != "ConvTranspose" or _attribute(node, "auto_pad", b"NOTSET") not in (
        b"SAME_UPPER",
        b"SAME_LOWER",
    ):
        return []
    return [
        StaticFinding(
            "convtranspose-auto-pad",
            "error",
            where,
            "ConvTranspose with auto_pad SAME_*",
            "give explicit pads (re-export; PyTorch writes explicit pads)",
            "measured: test_convtranspose_autopad_same raises "
            '"IndexError: list index out of range", frozen or not',
        )
    ]


def gemm_scalar_bias(
    node: onnx.NodeProto, where: str, shapes: dict[str, list[int]], constant: set[str]
) -> list[StaticFinding]:
    """A computed scalar bias; a constant one compiles (the frozen builds, test_operator_mm)."""
    if node.op_type != "Gemm" or len(node.input) < 3 or node.input[2] in constant:
        return []
    if shapes.get(node.input[2]) not in ([], [1]):
        return []
    return [
        StaticFinding(
            "gemm-scalar-bias",
            "error",
            where,
            "Gemm with a computed scalar or one-element bias C",
            "broadcast C to the output's last dimension in the export, or add it after the Gemm",
            "measured: test_gemm_default_scalar_bias, test_gemm_default_single_elem_vector_bias and "
            "torch.onnx.export of torch.addmm with a computed one-element bias (opsets 13, 17, every "
            "target) raise \"AttributeError: 'NoneType' object has no attribute 'reshape'\"",
        )
    ]


def max_of_one(node: onnx.NodeProto, where: str) -> list[StaticFinding]:
    if node.op_type != "Max" or len([i for i in node.input if i]) != 1:
        return []
    return [
        StaticFinding(
            "max-one-input",
            "error",
            where,
            "Max of a single input crashes the compiler",
            "replace it by Identity",
            "measured: test_max_one_input is killed by SIGSEGV (Min, Sum, Mean of one input compile)",
        )
    ]


def roialign_max(node: onnx.NodeProto, where: str) -> list[StaticFinding]:
    if node.op_type != "RoiAlign" or _attribute(node, "mode", b"avg") != b"max":
        return []
    return [
        StaticFinding(
            "roialign-max",
            "error",
            where,
            "RoiAlign with mode=max",
            "use mode=avg or run RoiAlign on the CPU",
            'measured: test_roialign_mode_max aborts: "Meet unsupported mode in RoiAlign, mode: max"',
        )
    ]


def uneven_split(node: onnx.NodeProto, where: str, shapes: dict[str, list[int]]) -> list[StaticFinding]:
    """Split by `num_outputs` (opset 18) of an axis it does not divide: the toolkit's
    onnxruntime (1.20) refuses what newer ones accept."""
    parts = _attribute(node, "num_outputs", 0)
    dims = shapes.get(node.input[0], []) if node.op_type == "Split" and node.input else []
    axis = _attribute(node, "axis", 0)
    if (
        not isinstance(parts, int)
        or parts <= 1
        or not isinstance(axis, int)
        or not -len(dims) <= axis < len(dims)
    ):
        return []
    if dims[axis] <= 0 or dims[axis] % parts == 0:
        return []
    return [
        StaticFinding(
            "uneven-split",
            "error",
            where,
            f"Split of {dims[axis]} into num_outputs={parts} uneven parts",
            "give the split sizes as a constant input instead of num_outputs",
            'measured: test_split_{1d,2d}_uneven_split_opset18 fail: "Cannot split using values in '
            "'split' attribute\" (the toolkit's onnxruntime)",
        )
    ]


def clip_both_bounds_computed(node: onnx.NodeProto, where: str, constant: set[str]) -> list[StaticFinding]:
    """Both Clip bounds computed: 5 of the 6 measured such models fail (not deferred to the
    one that compiled, test_clip, so as never to say "compiles" for the other five)."""
    bounds = node.input[1:3]
    if node.op_type != "Clip" or len(bounds) < 2 or any(not b or b in constant for b in bounds):
        return []
    return [
        StaticFinding(
            "clip-bounds-computed",
            "error",
            where,
            "both Clip bounds are computed in the graph",
            "make the bounds constants",
            "measured: test_clip_example, test_clip_inbounds, test_clip_outbounds, test_clip_splitbounds, "
            "test_clip_min_greater_than_max fail in the toolkit's onnxruntime (RUNTIME_EXCEPTION)",
        )
    ]


def tree_ensemble_double_splits(
    node: onnx.NodeProto, where: str, dtypes: dict[str, int]
) -> list[StaticFinding]:
    """float64 splits: the toolkit turns the float64 input into float32, not the attribute."""
    splits = _attribute(node, "nodes_splits", None)
    if node.op_type != "TreeEnsemble" or not isinstance(splits, onnx.TensorProto):
        return []
    if splits.data_type != TensorProto.DOUBLE:
        return []
    return [
        StaticFinding(
            "tree-ensemble-split-type",
            "error",
            where,
            "TreeEnsemble with float64 nodes_splits (the toolkit makes the input float32, not the splits)",
            "store the model in float32",
            "measured: test_ai_onnx_ml_tree_ensemble_single_tree fails: \"Attribute 'nodes_splits' must have "
            'same type as input"',
        )
    ]


def ml_tree_ensemble(node: onnx.NodeProto, where: str) -> list[StaticFinding]:
    """An ai.onnx.ml TreeEnsembleClassifier / Regressor: every skl2onnx export of one failed in
    build, the toolkit's onnxruntime finding the model invalid at that node (issue 33, after the
    ninth round: before, a tree ensemble was only "not measured")."""
    if node.op_type not in ML_TREE_ENSEMBLES or node.domain != "ai.onnx.ml":
        return []
    return [
        StaticFinding(
            "ml-tree-ensemble",
            "error",
            where,
            f"{node.op_type} (ai.onnx.ml): the toolkit's onnxruntime rejects the graph at this node",
            "run the tree ensemble on the CPU (onnxruntime) and convert only a neural part, if any",
            "measured: skl2onnx exports of DecisionTree / RandomForest regressors and a StandardScaler → "
            "ExtraTreesClassifier pipeline, opsets 12 and 19: INVALID_GRAPH in build on rk3588, rk3566 "
            "and rv1106 (bench/sklearn_probes.py skl_tree_*, skl_forest_*, skl_scaler_extratrees_*)",
        )
    ]


def ml_scaler_read(node: onnx.NodeProto, where: str, readers: dict[str, list[str]]) -> list[StaticFinding]:
    """An ai.onnx.ml Scaler whose result another node reads. skl2onnx writes a StandardScaler so;
    alone (the graph output) it compiled on rk3588 / rk3566, but before an MLPRegressor's MatMul
    (a regressor that compiles without it) the build failed on every target with "'NoneType'
    object is not iterable", as before a LogisticRegression and an MLPClassifier (session 16,
    after the ninth round: those failures had been put down to the classifiers)."""
    if node.op_type != "Scaler" or node.domain != "ai.onnx.ml" or not readers.get(node.output[0]):
        return []
    return [
        StaticFinding(
            "ml-scaler-read",
            "error",
            where,
            "a Scaler (ai.onnx.ml) read by another node: the toolkit loses its output's shape",
            "fold the scaling into the next layer's weights (x * scale - offset * scale before a "
            "MatMul is a MatMul and an Add), or write it as Sub and Mul",
            "measured: skl2onnx StandardScaler → MLPRegressor, opsets 12 and 19: build fails "
            "(\"'NoneType' object is not iterable\") on rk3588, rk3566 and rv1106; the MLPRegressor "
            "alone compiles (bench/sklearn_probes.py skl_scaler_mlpregressor_*, skl_mlpregressor_*)",
        )
    ]
