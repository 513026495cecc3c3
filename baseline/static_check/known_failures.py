"""Rules for failures the measured table alone does not pin to a cause: each names the
single-op models (or the toolkit message) it comes from, and fires on the pattern that failed
only. One rule per function; `known_failures` runs them on one node.
"""

from __future__ import annotations

import onnx
from onnx import TensorProto

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


def known_failures(node: onnx.NodeProto, where: str, facts: GraphFacts) -> list[StaticFinding]:
    return [
        *parameters_from_graph(node, where, facts.constant),
        *integer_clip(node, where, facts.dtypes),
        *recurrent_unnamed_output(node, where),
        *pooling_3d_dilations(node, where, facts.ranks),
        *eyelike_dtype(node, where),
        *pad_axes(node, where),
        *batchnorm_training(node, where),
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
            "crash (SIGSEGV), with them frozen they compile (baseline/data/op_support)",
        )
    ]


def integer_clip(node: onnx.NodeProto, where: str, dtypes: dict[str, int]) -> list[StaticFinding]:
    if node.op_type != "Clip" or not node.input or dtypes.get(node.input[0]) not in INTEGER:
        return []
    return [
        StaticFinding(
            "integer-clip",
            "error",
            where,
            "Clip on an integer tensor crashes the compiler",
            "Cast to float32 before the Clip",
            "measured: test_clip_default_int8_{min,max,inbounds} are killed by SIGSEGV, frozen or not",
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


def eyelike_dtype(node: onnx.NodeProto, where: str) -> list[StaticFinding]:
    if node.op_type != "EyeLike" or _attribute(node, "dtype", None) is None:
        return []
    return [
        StaticFinding(
            "eyelike-dtype",
            "error",
            where,
            "EyeLike with a dtype attribute (the toolkit rewrites the type, onnxruntime rejects it)",
            "drop the dtype attribute and Cast the output",
            'measured: test_eyelike_with_dtype fails ("Type Error: ... does not match expected type"); '
            "without dtype it compiles",
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
