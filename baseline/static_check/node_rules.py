"""Rules about single nodes: data-dependent and control-flow ops, shape inputs that must be
constant, ranks, attributes, domains, and the verdicts measured per op and target."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import onnx
from onnx import TensorProto

from baseline.files.onnx_facts import LAYOUT_OPS
from baseline.static_check.conversions import FILE_NAME as LEARNED_FILE
from baseline.static_check.conversions import Learned
from baseline.static_check.findings import CUT_REMEDY, MEASURED, StaticFinding, node_place
from baseline.static_check.graph import DATA_DEPENDENT, GraphFacts, folded_if, folded_nonzero
from baseline.static_check.known_failures import known_failures
from baseline.static_check.measured import (
    FLOATS,
    all_types,
    dtype_name,
    input_pattern,
    load_table,
    measured_compiled,
    measured_verdict,
    node_types,
)
from baseline.static_check.target_rules import target_failures

# Inputs that decide a shape and must be constants (measured: "need to be constant ... dynamic graph").
SHAPE_INPUTS = {
    "Reshape": (1,),
    "Resize": (1, 2, 3),
    "Upsample": (1,),
    "TopK": (1,),
    "Slice": (1, 2, 3, 4),
    "Tile": (1,),
    "Expand": (1,),
    "Pad": (1, 2),
    "ConstantOfShape": (0,),
    "Range": (0, 1, 2),
    "OneHot": (1,),
    "ReduceSum": (1,),
    "ReduceMean": (1,),
    "ReduceMax": (1,),
    "ReduceMin": (1,),
    "ReduceProd": (1,),
    "Squeeze": (1,),
    "Unsqueeze": (1,),
    "Split": (1,),
    # measured: as tested "The input 1 of X need to be constant"; frozen, each compiles
    "ReduceL1": (1,),
    "ReduceL2": (1,),
    "ReduceLogSum": (1,),
    "ReduceLogSumExp": (1,),
    "ReduceSumSquare": (1,),
    "CumSum": (1,),
    "BlackmanWindow": (0,),
    "HannWindow": (0,),
    "HammingWindow": (0,),
    "MelWeightMatrix": (0, 1, 2),
    "Compress": (1,),
}
# 5-D Conv, AveragePool, BatchNormalization and PRelu compile with 2.5.0; these do not (measured:
# 3-D MaxPool aborts the compiler; S2 §7.4 "Meet unsupported dims in reducesum ... Aborted").
# ConvTranspose: test_convtranspose_3d is killed by SIGABRT (measured).
# ReduceMean: torch.onnx.export of a 5-D mean over one axis compiles on every target at opsets
# 13 and 17 (bench/export_probes.py torch_rank5_mean_op*), so it is not among them.
# ReduceSum likewise (a 5-D sum over one axis, keepdim, compiles: torch_volume_sum_op13/17).
# 5-D ReduceMax / ReduceMin (amax / amin) compile in torch exports at opsets 13, 17 on every
# target (bench/export_probes.py torch_rank5_max_op*, _min_op*), as ReduceMean and ReduceSum do
FAILS_ABOVE_4D = {"MaxPool", "ConvTranspose"}
# measured on torch.onnx.export of F.max_pool3d (opsets 13, 17): SIGABRT on every target
FAILS_ABOVE_4D_IN_EXPORTS = {"MaxPool"}
DEFER_TO_MEASURED = {"non-constant-shape-input", "parameter-not-constant"}
REDUCTIONS = {
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL2",
    "ArgMax",
    "ArgMin",
}
SEQUENCE_OPS = {
    "SequenceConstruct",
    "SequenceAt",
    "SequenceInsert",
    "SequenceErase",
    "SequenceLength",
    "SequenceEmpty",
    "SplitToSequence",
    "ConcatFromSequence",
    "SequenceMap",
    "Optional",
    "OptionalHasElement",  # OptionalGetElement of a tensor compiles (measured); the op table judges it
}


def node_findings(
    graph: onnx.GraphProto,
    facts: GraphFacts,
    target: str,
    toolkit: str,
    opset: int = 0,
    learned: Learned | None = None,
) -> list[StaticFinding]:
    """Per node: this machine's conversions (`learned`) first, then the named rules and the
    measured table."""
    support = op_support(toolkit)
    findings: list[StaticFinding] = []
    float_output = any(dtype_name(facts.dtypes.get(output.name)) in FLOATS for output in graph.output)
    float_input = any(dtype_name(facts.dtypes.get(value.name)) in FLOATS for value in graph.input)
    for node in graph.node:
        where = node_place(node)
        found = [
            *_node_rules(node, where, facts, opset),
            *known_failures(node, where, facts),
            *target_failures(node, where, facts, target),
            *_uint8_arithmetic(node, where, facts.dtypes),
            *_uint8_input_cast(node, where, facts),
            *_uint8_input_transpose(node, where, facts),
            *_cast_to_uint8(node, where, facts.constant),
        ]
        if learned and not all(name in facts.constant for name in node.output):
            seen = learned_finding(node, where, facts, learned)
            if seen is not None:
                named = [f for f in found if f.severity == "error"]
                # a named rule the failure confirms comes first, with its own remedy (charboundary's
                # tree ensemble: "run it on the CPU", where the learned one says "replace the op")
                findings += [*named, seen] if seen.rule == "learned-refused" else [seen]
                continue
        # a node that folds away (all its outputs constant: Shape of a fixed shape too) is not compiled
        if not all(name in facts.constant for name in node.output):
            found += _measured(node, where, support, target)
            dtype = dtype_name(facts.dtypes.get(node.input[0])) if node.input else ""
            pattern = input_pattern(node, facts.constant)
            types = node_types(node, pattern, facts.dtypes)
            if measured_compiled(node.op_type, toolkit, target, pattern, dtype, types):
                # the generic "must be constant" rules yield to a model measured compiling so
                # (test_squeeze, test_reduce_l1_keep_dims_random: computed axes compile)
                found = [f for f in found if f.rule not in DEFER_TO_MEASURED]
            if not any(f.severity == "error" for f in found):  # a named cause beats the table's verdict
                found += measured_verdict(
                    node,
                    where,
                    toolkit,
                    target,
                    pattern,
                    dtype,
                    types,
                    float_output,
                    all_types(node, facts.dtypes, facts.values),
                    float_input,
                )
        findings += found
    return findings


def learned_finding(
    node: onnx.NodeProto, where: str, facts: GraphFacts, learned: Learned
) -> StaticFinding | None:
    """What this machine's real conversions say of a node with this one's signature: a failure
    the log pinned on such a node wins over a compile elsewhere (conservative)."""
    from baseline.static_check.node_signatures import signature

    key = signature(node, facts)
    if key in learned.failed:
        model, error = learned.failed[key]
        return StaticFinding(
            "learned-refused",
            "error",
            where,
            f"a node with this signature failed the real conversion of model {model!r} on this "
            f"machine: {error[:160]}",
            "replace the op or change its parameters, or " + CUT_REMEDY,
            f"this machine's conversions ({LEARNED_FILE}), learned from model {model!r}",
        )
    if key in learned.compiled:
        model = learned.compiled[key]
        return StaticFinding(
            "learned-compiled",
            "note",
            where,
            f"a node with this signature compiled in the real conversion of model {model!r} on this machine",
            "nothing to do",
            f"this machine's conversions ({LEARNED_FILE}), learned from model {model!r}",
        )
    return None


def _node_rules(node: onnx.NodeProto, where: str, facts: GraphFacts, opset: int) -> list[StaticFinding]:
    ranks, constant, shapes = facts.ranks, facts.constant, facts.shapes
    rank = max((ranks.get(name, 0) for name in [*node.input, *node.output]), default=0)
    return [
        *_domain_and_version(node, where),
        *_data_dependent(node, where, facts, opset),
        *_shape_inputs(node, where, constant),
        *_rank_rules(node, where, rank, constant, shapes),
        *_attribute_rules(node, where, constant),
        *_stft_default_onesided(node, where, facts),
    ]


def _data_dependent(node: onnx.NodeProto, where: str, facts: GraphFacts, opset: int) -> list[StaticFinding]:
    constant = facts.constant
    if node.op_type not in DATA_DEPENDENT:
        return []
    if folded_if(node, constant, facts.values):
        return []  # folded with all that reads it: graph_rules.folded_ifs
    if folded_nonzero(node, constant):
        return []  # folded: ribodetector and the shape-fed / initializer nonzero probes compile (measured)
    if node.op_type == "Compress" and len(node.input) > 1 and node.input[1] in constant:
        return []  # a constant condition fixes the output shape: test_compress_* frozen compile (measured)
    if node.op_type == "Scan" and opset >= 9:
        return []  # the toolkit unrolls it: test_scan9_* compile (measured); the op table judges the rest
    return [
        StaticFinding(
            "data-dependent-op",
            "error",
            where,
            DATA_DEPENDENT[node.op_type],
            CUT_REMEDY,
            "S2 §7.5, §7.12; measured",
        )
    ]


def _shape_inputs(node: onnx.NodeProto, where: str, constant: set[str]) -> list[StaticFinding]:
    return [
        StaticFinding(
            "non-constant-shape-input",
            "error",
            where,
            f"input {index} ({node.input[index]!r}) decides a shape but is computed from the graph inputs",
            "make it a constant (export with fixed sizes) or " + CUT_REMEDY,
            'measured: build raises "need to be constant ... dynamic graph"',
        )
        for index in SHAPE_INPUTS.get(node.op_type, ())
        if index < len(node.input) and node.input[index] not in constant
    ]


def _rank_rules(
    node: onnx.NodeProto, where: str, rank: int, constant: set[str], shapes: dict[str, list[int]]
) -> list[StaticFinding]:
    if rank <= 4 or node.op_type in LAYOUT_OPS:
        return []
    if node.op_type == "ConvTranspose" and len(node.input) > 1 and node.input[1] in constant:
        # measured: test_convtranspose_3d frozen and a generated 3-D ConvTranspose with constant
        # weights compile; with the weights a graph input it is killed by SIGABRT
        return []
    exported = node.op_type in FAILS_ABOVE_4D_IN_EXPORTS
    findings = [
        StaticFinding(
            "rank-above-4",
            "error" if node.op_type in FAILS_ABOVE_4D else "warning",
            where,
            f"works on {rank}-D tensors",
            "reshape to at most 4-D around it",
            "S2 §7.4, §7.9; measured"
            + (
                "; torch.onnx.export of F.max_pool3d is killed by SIGABRT (bench/export_probes.py)"
                if exported
                else ""
            ),
            thin=not exported,  # MaxPool: real exports fail too; a computed 3-D ConvTranspose: node tests
        )
    ]
    # a depthwise Conv3d (group = channels, as torch exports it) compiles on every target
    # (torch_volume_grouped_op13/17); other groupings are known from node tests only
    depthwise = shapes.get(node.input[1], [0, 0])[1:2] == [1] if len(node.input) > 1 else False
    if node.op_type == "Conv" and attribute(node, "group", 1) > 1 and not depthwise:
        findings.append(
            StaticFinding(
                "grouped-conv-3d",
                "error",
                where,
                "a grouped 3-D convolution",
                "use group=1 or a 2-D convolution",
                "measured: the compiler aborts (SIGABRT) on the node tests and on torch.onnx.export "
                "of nn.Conv3d(4, 4, 3, groups=2) at opsets 13, 17, every target "
                "(bench/export_probes.py torch_grouped_conv3d_op*)",
            )
        )
    return findings


def _attribute_rules(node: onnx.NodeProto, where: str, constant: set[str]) -> list[StaticFinding]:
    findings = []
    if node.op_type in REDUCTIONS and attribute(node, "keepdims", 1) == 0:
        findings.append(
            StaticFinding(
                "reduce-keepdims-0",
                "warning",
                where,
                "keepdims=0 changes the rank, which RKNN handles poorly",
                "use keepdims=1 and reshape afterwards",
                "S0 Table 6-1 (Reduce*)",
            )
        )
    # cubic of a constant folds (torch.onnx.export of bicubic interpolate of a buffer compiles on
    # every target, opsets 11, 13, 17); of a computed tensor it crashes (bench/export_probes.py)
    if (
        node.op_type == "Resize"
        and attribute(node, "mode", b"nearest") == b"cubic"
        and node.input
        and node.input[0] not in constant
    ):
        findings.append(
            StaticFinding(
                "resize-cubic",
                "error",
                where,
                "cubic interpolation of a computed tensor crashes the compiler (SIGSEGV on every target)",
                "use nearest or linear, or resize outside the model",
                "measured: test_resize_*_cubic* and torch.onnx.export of bicubic F.interpolate at opsets "
                "11, 13, 17 (SIGSEGV); of a constant it folds and compiles (bench/export_probes.py)",
            )
        )
    return findings


def _stft_default_onesided(node: onnx.NodeProto, where: str, facts: GraphFacts) -> list[StaticFinding]:
    """The spec's default is one-sided, but the toolkit sizes the output as two-sided when the
    attribute is absent (OnnxScript leaves defaults out; torch writes onesided explicitly). Its
    constant folding then rejects the real output where a node reads it; an STFT that is itself
    the graph output compiles (the node tests test_stft*). A constant signal is left out as the
    checker's policy has it (a constant folds, never harder), not measured."""
    if (
        node.op_type != "STFT"
        or any(a.name == "onesided" for a in node.attribute)
        or not node.input
        or node.input[0] in facts.constant
        or not facts.readers.get(node.output[0])
    ):
        return []
    return [
        StaticFinding(
            "stft-default-onesided",
            "error",
            where,
            "an STFT without an explicit onesided attribute, read by another node: the toolkit takes "
            'it as two-sided and its constant folding rejects the real one-sided output ("Please '
            'fix either the inputs/outputs or the model")',
            "write onesided=1 on the STFT node (the spec's default, made explicit)",
            "measured on rk3588, rk3566, rv1106: onnx-asr 0.12.0's kaldi, nemo80, gigaam_v3 and "
            "generated STFT → ReduceSumSquare (→ MatMul) probes fail; with onesided=1 or 0 written "
            "they compile, and so do the node tests test_stft, test_stft_with_window (the STFT "
            "is the graph output)",
        )
    ]


def _domain_and_version(node: onnx.NodeProto, where: str) -> list[StaticFinding]:
    if node.domain not in ("", "ai.onnx", "ai.onnx.ml"):  # ai.onnx.ml ops are in the op table
        return [
            StaticFinding(
                "custom-domain",
                "error",
                where,
                f"op from domain {node.domain!r}",
                "replace it with standard ONNX ops or run it on the CPU",
                "measured",
            )
        ]
    if node.op_type in SEQUENCE_OPS:
        return [
            StaticFinding(
                "sequence-op",
                "error",
                where,
                "sequence and optional ops are not supported",
                "keep sequence handling outside the model",
                "measured: load raises \"The Op of 'SequenceConstruct' is not supported yet\"",
            )
        ]
    return []


def attribute(node: onnx.NodeProto, name: str, default: Any) -> Any:
    for attribute in node.attribute:
        if attribute.name == name:
            return onnx.helper.get_attribute_value(attribute)
    return default


UINT8_CRASH_OPS = {
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "BitwiseNot",
}  # Max and Min of uint8 compile (test_max_uint8, test_min_uint8, measured)


def _uint8_arithmetic(node: onnx.NodeProto, where: str, dtypes: dict[str, int]) -> list[StaticFinding]:
    if node.op_type not in UINT8_CRASH_OPS or not any(dtypes.get(i) == TensorProto.UINT8 for i in node.input):
        return []
    return [
        StaticFinding(
            "uint8-arithmetic",
            "error",
            where,
            "arithmetic on uint8 tensors crashes the compiler",
            "Cast to float32 first (or feed float32)",
            'measured: "Not Support Dtype: 2" then abort (baseline/data/op_support)',
        )
    ]


def _uint8_graph_input(node: onnx.NodeProto, op_type: str, facts: GraphFacts) -> str | None:
    """The uint8 graph input `node` reads first, if it is an `op_type` node that reads one (raw
    pixels fed as bytes: neither produced in the graph nor a constant)."""
    if node.op_type != op_type or not node.input:
        return None
    source = node.input[0]
    graph_input = source not in facts.producers and source not in facts.constant
    return source if graph_input and facts.dtypes.get(source) == TensorProto.UINT8 else None


def _uint8_input_cast(node: onnx.NodeProto, where: str, facts: GraphFacts) -> list[StaticFinding]:
    """A Cast of a uint8 graph input (raw pixels fed as bytes): no single-op model measured it,
    and every torch export of it tried crashed, whatever followed the Cast."""
    source = _uint8_graph_input(node, "Cast", facts)
    if source is None:
        return []
    return [
        StaticFinding(
            "uint8-input-cast",
            "error",
            where,
            f"casts the uint8 graph input {source!r}: the compiler aborts on it",
            "feed float32 (cast the pixels before the model) or cut the Cast off the graph",
            "measured: torch.onnx.export of a uint8 input cast to float, then Relu, ÷ 255, a Conv or "
            "a transpose and Conv, opsets 13, 17: SIGABRT on rk3588, rk3566 and rv1106 "
            "(bench/export_probes.py torch_uint8_cast_*, torch_uint8_image_op*)",
        )
    ]


def _uint8_input_transpose(node: onnx.NodeProto, where: str, facts: GraphFacts) -> list[StaticFinding]:
    """A Transpose of a uint8 graph input (an HWC image made CHW before its Cast): alone, and in
    every torch export of it tried, the compiler aborts (issue 33, the ninth round)."""
    source = _uint8_graph_input(node, "Transpose", facts)
    if source is None:
        return []
    return [
        StaticFinding(
            "uint8-input-transpose",
            "error",
            where,
            f"transposes the uint8 graph input {source!r}: the compiler aborts on it",
            "feed float32 in the layout the model wants (transpose and cast the pixels before the model)",
            "measured: a single Transpose of a uint8 input (with and without a Cast after it) and "
            "torch.onnx.export of an HWC uint8 image permuted, unsqueezed, cast, ÷ 255 and convolved, "
            "opsets 11, 13, 17: SIGABRT on rk3588, rk3566 and rv1106 (bench/rule_probes.py ninth, "
            "bench/export_probes.py r9_uint8_hwc_op*)",
        )
    ]


def _cast_to_uint8(node: onnx.NodeProto, where: str, constant: set[str]) -> list[StaticFinding]:
    """A computed tensor cast to uint8 (pixels back to bytes inside the model)."""
    if node.op_type != "Cast" or not node.input or node.input[0] in constant:
        return []
    if attribute(node, "to", 0) != TensorProto.UINT8:
        return []
    return [
        StaticFinding(
            "cast-to-uint8",
            "error",
            where,
            "casts a computed tensor to uint8: the compiler aborts on it",
            "return float (scale and round after the model) or cut the Cast off the graph",
            "measured: torch.onnx.export of (sigmoid(x) * 255).clamp(0, 255).to(torch.uint8), as "
            "the output or cast back to float, opsets 13, 17: SIGABRT on rk3588, rk3566 and rv1106 "
            "(bench/export_probes.py ints_byte_output_op*, ints_byte_roundtrip_op*)",
        )
    ]


def _measured(
    node: onnx.NodeProto, where: str, support: Mapping[str, Any], target: str
) -> list[StaticFinding]:
    """Warnings the op table recorded for this op on this target (its verdict: `measured`)."""
    entry = support.get(node.op_type, {}).get(target)
    if entry is None or "cpu-fallback" not in entry.get("warnings", []):
        return []
    return [
        StaticFinding(
            "cpu-fallback",
            "warning",
            where,
            "the toolkit may run this op on the CPU",
            "check the op's parameters against the platform's limits",
            MEASURED,
        )
    ]


@functools.cache
def op_support(toolkit: str) -> dict[str, Any]:
    """The measured table for a toolkit version: op → target → verdict (empty if not measured)."""
    ops: dict[str, Any] = load_table(toolkit).get("ops", {})
    return ops
