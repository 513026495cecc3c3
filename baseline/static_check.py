"""Predict, from the ONNX graph alone, whether RKNN-Toolkit2 will compile a model, and why not.

No toolkit is needed and nothing is run: shape inference, a constant-propagation pass
and a set of rules, each with an id, the node it applies to, its source and a remedy.
The per-operator verdicts come from `baseline/data/op_support/`, measured with the real
toolkit by `scripts/measure_op_support.py`.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import onnx
from onnx import TensorProto, version_converter

from baseline.compat import check_opset
from baseline.errors import InputError
from baseline.onnx_facts import graph_inputs, load_onnx_structure

FP16_MAX = 65504.0

DATA_DEPENDENT = {
    "NonZero": "its output shape depends on the data",
    "NonMaxSuppression": "its output shape depends on the data",
    "Unique": "its output shape depends on the data",
    "Compress": "its output shape depends on the data",
    "Loop": "control flow is not supported",
    "If": "control flow is not supported",
    "Scan": "control flow is not supported",
}
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
}
# 5-D Conv, AveragePool, BatchNormalization and PRelu compile with 2.5.0; these do not (measured:
# 3-D MaxPool aborts the compiler; S2 §7.4 "Meet unsupported dims in reducesum ... Aborted").
FAILS_ABOVE_4D = {"MaxPool", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"}
SHAPE_ONLY = {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity"}
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
CUT_REMEDY = "cut the graph before it (load_onnx(outputs=[...])) and run that part on the CPU"
MEASURED = "measured with RKNN-Toolkit2 (baseline/data/op_support)"


@dataclass(frozen=True)
class StaticFinding:
    rule: str
    severity: str  # error: predicted not to compile; warning: compiles, worth knowing
    where: str
    message: str
    remedy: str
    source: str

    def line(self) -> str:
        return f"[{self.rule}] {self.where}: {self.message}; {self.remedy}"


@dataclass
class CheckReport:
    model: str
    target: str
    toolkit: str
    nodes: int
    seconds: float
    findings: list[StaticFinding] = field(default_factory=list)

    @property
    def predicted_compile(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    def errors(self) -> list[StaticFinding]:
        return [f for f in self.findings if f.severity == "error"]


def check_model(
    path: Path,
    target: str = "rk3588",
    toolkit: str = "2.5.0",
    shapes: Mapping[str, list[int]] | None = None,
    output_ranges: Mapping[str, float] | None = None,
) -> CheckReport:
    """Every finding for `path` built for `target` by `toolkit`; `shapes` fixes symbolic dims,
    `output_ranges` (largest |value| per output, from reference runs) enables the fp16 check."""
    start = time.perf_counter()
    model = load_onnx_structure(path)
    _fix_input_shapes(model, shapes or {})
    inferred = _infer(model, path)
    graph = inferred.graph
    findings = [
        *_signature(model, toolkit),
        *_dynamic_inputs(model),
        *_types(model),
        *_old_op_versions(model),
        *_node_findings(graph, _graph_facts(inferred, model), target, toolkit),
        *_runs_in_onnxruntime(model, path),
        *_fp16_range(output_ranges or {}),
    ]
    return CheckReport(
        model=path.name,
        target=target,
        toolkit=toolkit,
        nodes=len(graph.node),
        seconds=time.perf_counter() - start,
        findings=findings,
    )


def _fix_input_shapes(model: onnx.ModelProto, shapes: Mapping[str, list[int]]) -> None:
    for value in graph_inputs(model):
        if value.name in shapes and value.type.tensor_type.HasField("shape"):
            dims = value.type.tensor_type.shape.dim
            for dim, size in zip(dims, shapes[value.name], strict=False):
                dim.Clear()
                dim.dim_value = size


def _infer(model: onnx.ModelProto, path: Path) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception as error:  # onnx raises InferenceError / ValidationError, both bare
        raise InputError(f"{path}: shape inference failed ({str(error).splitlines()[0]})") from None


@dataclass(frozen=True)
class GraphFacts:
    """Per tensor: rank and element type after shape inference, and whether it folds to a constant."""

    ranks: dict[str, int]
    dtypes: dict[str, int]
    constant: set[str]


def _graph_facts(inferred: onnx.ModelProto, original: onnx.ModelProto) -> GraphFacts:
    graph = inferred.graph
    values = [v for v in [*graph.value_info, *graph.input, *graph.output] if v.type.HasField("tensor_type")]
    return GraphFacts(
        ranks={
            v.name: len(v.type.tensor_type.shape.dim) for v in values if v.type.tensor_type.HasField("shape")
        },
        dtypes={v.name: v.type.tensor_type.elem_type for v in values},
        constant=_constant_tensors(graph, _inputs_static(original)),
    )


def _static_shape(value: onnx.ValueInfoProto) -> bool:
    tensor = value.type.tensor_type
    return tensor.HasField("shape") and all(d.dim_value > 0 for d in tensor.shape.dim)


def _constant_tensors(graph: onnx.GraphProto, inputs_static: bool) -> set[str]:
    """Tensors the toolkit can fold to constants: initializers, Constant nodes, anything
    computed only from those, and the shape of any tensor whose shape is fixed — with static
    graph inputs, that is every tensor not downstream of a data-dependent op."""
    constant = {t.name for t in graph.initializer} | {""}
    static = {v.name for v in [*graph.input, *graph.value_info] if _static_shape(v)}
    dynamic: set[str] = set()
    for node in graph.node:  # nodes are topologically sorted in a valid model
        if node.op_type in DATA_DEPENDENT or any(i in dynamic for i in node.input):
            dynamic.update(node.output)
        shape_known = node.input and (
            node.input[0] in static or (inputs_static and node.input[0] not in dynamic)
        )
        if (
            node.op_type == "Constant"
            or (node.op_type in ("Shape", "Size") and shape_known)
            or (node.op_type not in DATA_DEPENDENT and all(i in constant for i in node.input))
        ):
            constant.update(node.output)
    return constant


def _old_op_versions(model: onnx.ModelProto) -> list[StaticFinding]:
    """Old op versions the toolkit refuses or upgrades wrongly (measured on onnx's own test models)."""
    opset = next((e.version for e in model.opset_import if e.domain in ("", "ai.onnx")), 0)
    slopes = {t.name: list(t.dims) for t in model.graph.initializer}
    input_ranks = {v.name: len(v.type.tensor_type.shape.dim) for v in graph_inputs(model)}
    findings = []
    for node in model.graph.node:
        where = f"node {node.name or node.output[0]!r} ({node.op_type})"
        if node.op_type == "Dropout" and opset <= 9:
            findings.append(
                StaticFinding(
                    "old-dropout",
                    "error",
                    where,
                    f"Dropout of opset {opset}",
                    "re-export at opset 10 or later, or drop it for inference",
                    "measured: build raises \"Not support 'Dropout' of opset-9!\"",
                )
            )
        legacy = opset < 7 and (_channel_slope(node, slopes) or _broadcast_gemm_input(node, input_ranks))
        if legacy:
            findings.append(
                StaticFinding(
                    "legacy-broadcast",
                    "error",
                    where,
                    f"opset-{opset} broadcasting (by axis, not numpy-style)",
                    "re-export at opset 7 or later",
                    "measured: the toolkit's onnxruntime check fails on the upgraded graph",
                )
            )
    return findings


def _broadcast_gemm_input(node: onnx.NodeProto, input_ranks: dict[str, int]) -> bool:
    """Gemm broadcasting a 1-D graph input C: the upgraded graph expects a 2-D C (measured)."""
    return (
        node.op_type == "Gemm"
        and _attribute(node, "broadcast", 0) == 1
        and len(node.input) > 2
        and input_ranks.get(node.input[2], 2) < 2
    )


def _channel_slope(node: onnx.NodeProto, shapes: dict[str, list[int]]) -> bool:
    """A PRelu slope of shape (C,): opset 6 applies it per channel, numpy broadcasting per last axis."""
    if node.op_type != "PRelu" or len(node.input) < 2:
        return False
    slope = shapes.get(node.input[1], [])
    return len(slope) == 1 and slope[0] > 1


def _inputs_static(model: onnx.ModelProto) -> bool:
    return all(_static_shape(value) for value in graph_inputs(model))


NUMERIC = {
    TensorProto.FLOAT,
    TensorProto.FLOAT16,
    TensorProto.DOUBLE,
    TensorProto.BOOL,
    TensorProto.INT8,
    TensorProto.UINT8,
    TensorProto.INT16,
    TensorProto.UINT16,
    TensorProto.INT32,
    TensorProto.INT64,
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
    "OptionalGetElement",
    "OptionalHasElement",
}


def _types(model: onnx.ModelProto) -> list[StaticFinding]:
    """Inputs and outputs RKNN cannot hold: sequences, maps, strings (measured)."""
    findings = []
    for value in [*graph_inputs(model), *model.graph.output]:
        kind = value.type.WhichOneof("value")
        elem = value.type.tensor_type.elem_type if kind == "tensor_type" else None
        if kind != "tensor_type" or elem not in NUMERIC:
            what = (
                kind.replace("_type", "")
                if kind != "tensor_type"
                else onnx.TensorProto.DataType.Name(elem or 0)
            )
            findings.append(
                StaticFinding(
                    "non-numeric-io",
                    "error",
                    f"tensor {value.name!r}",
                    f"is a {what.lower()}, not a numeric tensor",
                    "keep sequences, maps and strings outside the model",
                    "measured: build raises \"Not support input data type 'object'!\"",
                )
            )
    return findings


UPGRADE_OPSET = 13
RUN_CHECK_LIMIT = 1 << 24
"""Run the zero-input check only below this many input elements, to stay well under a second."""


def _runs_in_onnxruntime(model: onnx.ModelProto, path: Path) -> list[StaticFinding]:
    """The toolkit folds constants and checks shapes with onnxruntime while building: a graph
    onnxruntime rejects, or fails to run on zeros, fails the build too (measured). A graph
    too old for this onnxruntime's kernels is upgraded first, as the toolkit does."""
    message = _onnxruntime_error(model)
    if message is not None and "NOT_IMPLEMENTED" in message:
        try:
            upgraded = version_converter.convert_model(model, UPGRADE_OPSET)  # type: ignore[attr-defined]
            message = _onnxruntime_error(upgraded)
        except Exception:  # the converter raises bare RuntimeErrors for graphs it cannot upgrade
            return []
    if message is None or "NOT_IMPLEMENTED" in message or "external data" in message.lower():
        return []
    return [
        StaticFinding(
            "onnxruntime-rejects",
            "error",
            "model",
            f"onnxruntime cannot run it: {message}",
            "fix the graph so that onnxruntime runs it (the toolkit uses onnxruntime while building)",
            "measured: build raises onnxruntime's error",
        )
    ]


def _onnxruntime_error(model: onnx.ModelProto) -> str | None:
    try:
        import numpy as np
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 4
        session = ort.InferenceSession(
            model.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"]
        )
        feeds = _zero_feeds(session, np)
        if feeds is not None:
            session.run(None, feeds)
    except Exception as error:  # onnxruntime's exception classes are not public API
        return str(error).strip().splitlines()[0][:200]
    return None


def _zero_feeds(session: Any, np: Any) -> dict[str, Any] | None:
    feeds = {}
    for value in session.get_inputs():
        if not all(isinstance(dim, int) and dim > 0 for dim in value.shape) or "tensor" not in value.type:
            return None
        if int(np.prod(value.shape)) > RUN_CHECK_LIMIT:
            return None
        dtype = {
            "tensor(float)": np.float32,
            "tensor(float16)": np.float16,
            "tensor(double)": np.float64,
            "tensor(int64)": np.int64,
            "tensor(int32)": np.int32,
            "tensor(bool)": np.bool_,
            "tensor(uint8)": np.uint8,
            "tensor(int8)": np.int8,
        }.get(value.type)
        if dtype is None:
            return None
        feeds[value.name] = np.zeros(value.shape, dtype=dtype)
    return feeds


def _signature(model: onnx.ModelProto, toolkit: str) -> list[StaticFinding]:
    opset = next((e.version for e in model.opset_import if e.domain in ("", "ai.onnx")), None)
    return [
        StaticFinding(
            f.rule,
            "error",
            "model",
            f.message.split(";")[0],
            "re-export with a lower opset (torch.onnx.export(..., opset_version=19))",
            f.source,
        )
        for f in check_opset(toolkit, opset)
    ]


def _dynamic_inputs(model: onnx.ModelProto) -> list[StaticFinding]:
    findings = []
    for value in graph_inputs(model):
        if not _static_shape(value):
            dims = [
                d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                for d in value.type.tensor_type.shape.dim
            ]
            findings.append(
                StaticFinding(
                    "dynamic-input",
                    "error",
                    f"input {value.name!r}",
                    f"dims {dims} are not fixed",
                    "export with fixed sizes, or fix them: --shape NAME=1,3,224,224 (fixtures.shapes)",
                    'measured: load_onnx raises "The input shape [...] is not support!"',
                )
            )
    return findings


def _node_findings(
    graph: onnx.GraphProto, facts: GraphFacts, target: str, toolkit: str
) -> list[StaticFinding]:
    support = op_support(toolkit)
    findings: list[StaticFinding] = []
    for node in graph.node:
        where = f"node {node.name or node.output[0]!r} ({node.op_type})"
        findings += _node_rules(node, where, facts.ranks, facts.constant)
        if not all(name in facts.constant for name in node.input):  # a node that folds away is not compiled
            findings += _measured(node, where, support, target)
        findings += _uint8_arithmetic(node, where, facts.dtypes)
    return findings


def _node_rules(
    node: onnx.NodeProto, where: str, ranks: dict[str, int], constant: set[str]
) -> list[StaticFinding]:
    rank = max((ranks.get(name, 0) for name in [*node.input, *node.output]), default=0)
    return [
        *_domain_and_version(node, where),
        *_data_dependent(node, where),
        *_shape_inputs(node, where, constant),
        *_rank_rules(node, where, rank),
        *_attribute_rules(node, where),
    ]


def _data_dependent(node: onnx.NodeProto, where: str) -> list[StaticFinding]:
    if node.op_type not in DATA_DEPENDENT:
        return []
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


def _rank_rules(node: onnx.NodeProto, where: str, rank: int) -> list[StaticFinding]:
    if rank <= 4 or node.op_type in SHAPE_ONLY:
        return []
    findings = [
        StaticFinding(
            "rank-above-4",
            "error" if node.op_type in FAILS_ABOVE_4D else "warning",
            where,
            f"works on {rank}-D tensors",
            "reshape to at most 4-D around it",
            "S2 §7.4, §7.9; measured",
        )
    ]
    if node.op_type == "Conv" and _attribute(node, "group", 1) > 1:
        findings.append(
            StaticFinding(
                "grouped-conv-3d",
                "error",
                where,
                "a grouped 3-D convolution",
                "use group=1 or a 2-D convolution",
                "measured: the compiler aborts (SIGABRT)",
            )
        )
    return findings


def _attribute_rules(node: onnx.NodeProto, where: str) -> list[StaticFinding]:
    findings = []
    if node.op_type in REDUCTIONS and _attribute(node, "keepdims", 1) == 0:
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
    if node.op_type == "Resize" and _attribute(node, "mode", b"nearest") == b"cubic":
        findings.append(
            StaticFinding(
                "resize-cubic",
                "error",
                where,
                "cubic interpolation crashes the compiler (SIGSEGV on every target)",
                "use nearest or linear, or resize outside the model",
                "measured (baseline/data/op_support); S0 Table 6-1 (Resize)",
            )
        )
    return findings


def _domain_and_version(node: onnx.NodeProto, where: str) -> list[StaticFinding]:
    if node.domain not in ("", "ai.onnx"):
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


def _attribute(node: onnx.NodeProto, name: str, default: Any) -> Any:
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
    "Max",
    "Min",
}


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


def _measured(
    node: onnx.NodeProto, where: str, support: Mapping[str, Any], target: str
) -> list[StaticFinding]:
    """The op-support table's verdict for this op on this target."""
    entry = support.get(node.op_type, {}).get(target)
    if entry is None or node.op_type in DATA_DEPENDENT:
        return []
    status = entry.get("float32_status") or entry.get("status")  # ordinary models are float32
    example = str((entry.get("errors") or [""])[0])[:200]
    if status == "unsupported":
        # Single-op test models often fail for reasons of their own (odd inputs, attributes);
        # only a refusal of the op itself ("The Op of 'X' is not support") predicts a failure.
        refused = "data-dependent-op" in entry.get("error_rules", [])
        return [
            StaticFinding(
                "op-unsupported" if refused else "op-unproven",
                "error" if refused else "warning",
                where,
                f"no measured {node.op_type} model compiled for {target}: {example}".rstrip(": "),
                "replace the op or " + CUT_REMEDY,
                MEASURED,
            )
        ]
    if "cpu-fallback" in entry.get("warnings", []):
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
    return []


def _fp16_range(output_ranges: Mapping[str, float]) -> list[StaticFinding]:
    return [
        StaticFinding(
            "fp16-overflow",
            "warning",
            f"output {name!r}",
            f"reference values reach {value:.3g}, beyond fp16's {FP16_MAX:g}: an fp16 build "
            "will output Inf/NaN",
            "bound the activations or quantize this target",
            "S2 §9.15; measured (demo model `overflow`)",
        )
        for name, value in output_ranges.items()
        if value > FP16_MAX
    ]


@functools.cache
def op_support(toolkit: str) -> dict[str, Any]:
    """The measured table for a toolkit version: op → target → verdict (empty if not measured)."""
    resource = resources.files("baseline").joinpath(f"data/op_support/rknn-toolkit2-{toolkit}.json")
    if not resource.is_file():
        return {}
    data = json.loads(resource.read_text(encoding="utf-8"))
    ops: dict[str, Any] = data.get("ops", {})
    return ops
