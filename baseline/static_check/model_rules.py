"""Rules about the whole model: its opset and signature, its inputs and outputs, old op
versions, and whether onnxruntime (which the toolkit runs while building) accepts it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import onnx
from onnx import TensorProto, version_converter

from baseline.compat import check_opset
from baseline.files.onnx_facts import graph_inputs
from baseline.static_check.findings import StaticFinding, node_place
from baseline.static_check.graph import static_shape
from baseline.static_check.measured import load_table
from baseline.static_check.node_rules import attribute

FP16_MAX = 65504.0

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


def old_op_versions(model: onnx.ModelProto) -> list[StaticFinding]:
    """Old op versions the toolkit refuses or upgrades wrongly (measured on onnx's own test models)."""
    opset = next((e.version for e in model.opset_import if e.domain in ("", "ai.onnx")), 0)
    slopes = {t.name: list(t.dims) for t in model.graph.initializer}
    input_ranks = {v.name: len(v.type.tensor_type.shape.dim) for v in graph_inputs(model)}
    findings = []
    for node in model.graph.node:
        where = node_place(node)
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
                    "measured: the toolkit's onnxruntime check fails on the upgraded graph (PyTorch's "
                    "own opset-6 PRelu and addmm exports in the onnx package, every target)",
                )
            )
    return findings


def _broadcast_gemm_input(node: onnx.NodeProto, input_ranks: dict[str, int]) -> bool:
    """Gemm broadcasting a 1-D graph input C: the upgraded graph expects a 2-D C (measured)."""
    return (
        node.op_type == "Gemm"
        and attribute(node, "broadcast", 0) == 1
        and len(node.input) > 2
        and input_ranks.get(node.input[2], 2) < 2
    )


def _channel_slope(node: onnx.NodeProto, shapes: dict[str, list[int]]) -> bool:
    """A PRelu slope of shape (C,): opset 6 applies it per channel, numpy broadcasting per last axis."""
    if node.op_type != "PRelu" or len(node.input) < 2:
        return False
    slope = shapes.get(node.input[1], [])
    return len(slope) == 1 and slope[0] > 1


def io_types(model: onnx.ModelProto) -> list[StaticFinding]:
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


def runs_in_onnxruntime(
    model: onnx.ModelProto, path: Path, shapes: Mapping[str, list[int]]
) -> list[StaticFinding]:
    """The toolkit folds constants and checks shapes with onnxruntime while building: a graph
    onnxruntime rejects, or fails to run on ones, fails the build too (measured). A graph
    too old for this onnxruntime's kernels is upgraded first, as the toolkit does. The session
    is the golden run's (`baseline.runtime.sessions`), so that a verify builds one per model, not two."""
    message = _file_error(path, shapes)
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


def _file_error(path: Path, shapes: Mapping[str, list[int]]) -> str | None:
    """The model file in the shared session, run on ones shaped as the fixtures are."""
    from baseline.runtime.sessions import shared_session

    try:
        import numpy as np

        session = shared_session(path)
        feeds = _zero_feeds(session, np, shapes)
        if feeds is not None:
            session.run(None, feeds)
    except Exception as error:  # onnxruntime's exception classes are not public API
        return _first_line(error)
    return None


def _onnxruntime_error(model: onnx.ModelProto) -> str | None:
    """An upgraded graph (in memory, never shared): optimisations off, they only cost time."""
    try:
        import numpy as np
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 4
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(
            model.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"]
        )
        feeds = _zero_feeds(session, np, {})
        if feeds is not None:
            session.run(None, feeds)
    except Exception as error:  # onnxruntime's exception classes are not public API
        return _first_line(error)
    return None


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__


def _zero_feeds(session: Any, np: Any, shapes: Mapping[str, list[int]]) -> dict[str, Any] | None:
    feeds = {}
    for value in session.get_inputs():
        shape = shapes.get(value.name, value.shape)  # the fixtures fix symbolic dims
        if not all(isinstance(dim, int) and dim > 0 for dim in shape) or "tensor" not in value.type:
            return None
        if int(np.prod(shape)) > RUN_CHECK_LIMIT:
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
        # ones, not zeros: integer Div / Mod by zero fails onnxruntime but not the toolkit
        # (test_div_int8, test_mod_uint8 compile, measured)
        feeds[value.name] = np.ones(shape, dtype=dtype)
    return feeds


LOWER_OPSET = {
    "pytorch": "torch.onnx.export(..., opset_version=19)",
    "skl2onnx": "skl2onnx's to_onnx(..., target_opset={'': 19, 'ai.onnx.ml': 3})",
    "onnxmltools": "onnxmltools' convert_*(..., target_opset=19)",
    "tf2onnx": "python -m tf2onnx.convert ... --opset 19",
    "paddle2onnx": "paddle2onnx ... --opset_version 19",
}
"""How each exporter writes a lower opset, by the `producer_name` it stamps on the model."""


def signature(model: onnx.ModelProto, toolkit: str) -> list[StaticFinding]:
    opset = next((e.version for e in model.opset_import if e.domain in ("", "ai.onnx")), None)
    how = LOWER_OPSET.get(model.producer_name.strip().lower()[:32], LOWER_OPSET["pytorch"])
    return [
        StaticFinding(
            f.rule,
            "error",
            "model",
            f.message.split(";")[0],
            f"re-export with a lower opset ({how})",
            f.source,
        )
        for f in check_opset(toolkit, opset)
    ]


def dynamic_inputs(model: onnx.ModelProto) -> list[StaticFinding]:
    findings = []
    for value in graph_inputs(model):
        if not static_shape(value):
            dims = [
                d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                for d in value.type.tensor_type.shape.dim
            ]
            if 0 in dims:
                findings.append(_empty_input(value.name, dims))
                continue
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


def conflicting_value_info(graph: onnx.GraphProto) -> list[StaticFinding]:
    """A tensor that `value_info` declares more than once with different dims. Ultralytics'
    TorchScript exports with dynamic axes name most tensors 4-7 times, with symbolic expressions
    that disagree (an upsampled map's `floor(2.0*...)` beside the stride arithmetic of the map it
    joins), and the ninth round's YOLO11n so stops in the toolkit's `correct_ops` on
    `KeyError: dtype('<U182')`. Its bisection kept 74 tensors, all needed, 7 entries each; their
    first 6 entries, or a generated graph with conflicting entries, compile: the cause is not
    isolated, so the finding is unisolated evidence ("unknown"), never "fails" alone. The same
    duplicates with equal dims compile (a static export, the seventh round's fall detector)."""
    shapes: dict[str, set[tuple[object, ...]]] = {}
    for entry in graph.value_info:
        dims = tuple(
            d.dim_value if d.HasField("dim_value") else d.dim_param for d in entry.type.tensor_type.shape.dim
        )
        shapes.setdefault(entry.name, set()).add(dims)
    conflicting = [name for name, seen in shapes.items() if len(seen) > 1]
    if not conflicting:
        return []
    return [
        StaticFinding(
            "conflicting-value-info",
            "error",
            "model",
            f"value_info declares {len(conflicting)} tensor(s) more than once with different dims "
            f"(first {conflicting[0]!r})",
            "remove the model's value_info (del model.graph.value_info[:]; the toolkit infers "
            "shapes itself), or export with fixed sizes",
            "measured, not isolated: the ninth round's dynamic-axes YOLO11n fails on every target "
            "with KeyError: dtype('<U182') and compiles without its value_info; generated graphs "
            "with such entries compile, so this says unknown (bench/value_info_bisect.py)",
        )
    ]


def _empty_input(name: str, dims: list[Any]) -> StaticFinding:
    return StaticFinding(
        "empty-input",
        "error",
        f"input {name!r}",
        f"dims {dims} hold no elements",
        "give every input at least one element",
        "toolkit message: \"The input shape [3, 0, 5] of 'x' is not support!\" (measured: test_tril_zero)",
    )


def fp16_range(output_ranges: Mapping[str, float]) -> list[StaticFinding]:
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


def constant_outputs(graph: onnx.GraphProto, constant: set[str]) -> list[StaticFinding]:
    """Outputs that depend on no graph input fold away, and the toolkit refuses a model left
    with nothing to compute."""
    # the toolkit computes Size rather than folding it: test_size compiles (measured), test_shape not
    sizes = {name for node in graph.node if node.op_type == "Size" for name in node.output}
    outputs = [value.name for value in graph.output]
    if not outputs or not all(name in constant and name not in sizes for name in outputs):
        return []
    return [
        StaticFinding(
            "constant-outputs",
            "error",
            "model",
            "every output folds to a constant (it depends on no graph input, or reads an If the "
            "toolkit folds: if-on-shape)",
            "make the outputs depend on the inputs (export with fixed sizes, so no If tests a "
            "shape), or ship the constants without a model",
            'toolkit message: "All outputs ... of model are constants, The model is invalid!" '
            "(measured: test_shape, test_size and the window functions alone; torch_if_squeeze_* "
            "exports whose every output reads the If)",
        )
    ]


def quantized_only(target: str, toolkit: str, quantized: bool | None) -> list[StaticFinding]:
    """A platform the toolkit builds only quantized, asked for a float (fp16) build."""
    note = target_note(toolkit, target)
    if quantized is not False or not note.startswith("w8a8"):
        return []
    return [
        StaticFinding(
            "needs-quantized-build",
            "error",
            "model",
            f"{target} needs a quantized build: the toolkit refuses an fp16 one",
            f"build it quantized (`baseline check --quantized`; in baseline.toml a w8a8 target: "
            f'{{ name = "{target}-w8a8", platform = "{target}", quantization = {{ dtype = "w8a8" }} }})',
            f"measured: {note.removeprefix('w8a8: ')}",
        )
    ]


def unmeasured_toolkit(toolkit: str, target: str, quantized: bool | None) -> list[StaticFinding]:
    """No measured table for this toolkit and target (or build kind): the checker cannot judge ops."""
    measured = target_quantization(toolkit, target)
    kind = None if quantized is None else ("w8a8" if quantized else "fp16")
    if measured is not None and (kind is None or kind == measured):
        return []
    what = f"toolkit {toolkit} on {target}" + (f" ({kind})" if kind else "")
    return [
        StaticFinding(
            "not-measured-target",
            "warning",
            "model",
            f"not measured: no op table for {what}; the ops cannot be judged",
            "measure it: python scripts/measure_op_support.py --toolkit VERSION --targets TARGET",
            "baseline/data/op_support",
            unknown=True,
        )
    ]


def target_note(toolkit: str, target: str) -> str:
    return str(_targets(toolkit).get(target, {}).get("note", ""))


def target_quantization(toolkit: str, target: str) -> str | None:
    entry = _targets(toolkit).get(target)
    return None if entry is None else str(entry.get("quantization", "fp16"))


def _targets(toolkit: str) -> dict[str, Any]:
    """The measured table's per-target build settings (fp16 or w8a8, and why)."""
    targets: dict[str, Any] = load_table(toolkit).get("generated", {}).get("targets", {})
    return targets
