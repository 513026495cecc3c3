"""`check_model`: every rule, in the order the report lists their findings."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import onnx

from baseline.files.hashing import file_key
from baseline.files.onnx_facts import check_external_data, load_onnx_structure
from baseline.models.intent import DEFAULT_TOOLKIT_VERSION
from baseline.runtime.sessions import build_in_background, session_building
from baseline.static_check.conversions import learned
from baseline.static_check.crash_patterns import (
    duplicate_opset_import,
    elementwise_const_rank5,
    gemm_column_product,
    gemm_column_sum,
    yolov8_dfl_split,
)
from baseline.static_check.findings import CheckReport, StaticFinding
from baseline.static_check.graph import GraphFacts, fix_input_shapes, graph_facts, infer_shapes, inputs_static
from baseline.static_check.graph_rules import (
    attention_bare_query,
    attention_softmax_identity,
    conv1d_grouped_mean,
    dequantized_gelu,
    folded_ifs,
    pad_fused_into_conv,
    prequantized_quantized_build,
    quantized_float_join,
    quantized_integer_divisor,
    quantized_integer_only,
    quantized_matmul_float_residual,
    quantized_yolov5_head,
    shape_only_graph_inputs,
    unused_graph_inputs,
)
from baseline.static_check.measured import was_measured
from baseline.static_check.model_rules import (
    conflicting_value_info,
    constant_outputs,
    dynamic_inputs,
    fp16_range,
    io_types,
    old_op_versions,
    quantized_only,
    runs_in_onnxruntime,
    signature,
    target_quantization,
    unmeasured_toolkit,
)
from baseline.static_check.node_rules import node_findings
from baseline.static_check.target_rules import long_io_names
from baseline.static_check.weightless import load_weightless


@dataclass(frozen=True)
class ModelAnalysis:
    """What the rules read that does not depend on the target or toolkit: shape inference and
    the onnxruntime probe, most of a check's time and all of its memory."""

    model: onnx.ModelProto  # the weights without their bytes
    graph: onnx.GraphProto  # inferred; the weights without their bytes (`load_weightless`)
    facts: GraphFacts
    opset: int
    graph_findings: list[StaticFinding]  # dynamic inputs, I/O types, old ops, constant outputs
    path: Path
    shapes: Mapping[str, list[int]]
    declared_static: bool = True  # every input dim fixed in the file: the converter is not given inputs=

    @functools.cached_property
    def onnxruntime_findings(self) -> list[StaticFinding]:
        """The probe, once per model. It waits for the session (`build_in_background`), so a
        check asks for it after its other rules: those (the op table's first read, ~0.03 s)
        run while the session is still being built."""
        return runs_in_onnxruntime(self.model, self.path, self.shapes)


_guard = threading.Lock()
_last: tuple[tuple[str, ...], ModelAnalysis] | None = None
"""The last model analysed: a verify checks each model once per target, one after the other
(measured: per-target sessions took 654 MB for an 87 MB model). One model only, because a
model's protos can take gigabytes."""


def check_model(
    path: Path,
    target: str = "rk3588",
    toolkit: str = DEFAULT_TOOLKIT_VERSION,
    shapes: Mapping[str, list[int]] | None = None,
    output_ranges: Mapping[str, float] | None = None,
    quantized: bool | None = None,
    learned_root: Path | None = None,
) -> CheckReport:
    """Every finding for `path` built for `target` by `toolkit`; `shapes` fixes symbolic dims,
    `output_ranges` (largest |value| per output, from reference runs) enables the fp16 check,
    `quantized` says whether the build is quantized (None: as the op table measured the target),
    `learned_root` is the cache folder whose real conversions are consulted first (`conversions`)."""
    start = time.perf_counter()
    analysis = analyse(path, shapes or {})
    build_quantized = quantized if quantized is not None else target_quantization(toolkit, target) == "w8a8"
    seen = learned(learned_root, toolkit, target, build_quantized)
    findings = [
        *quantized_only(target, toolkit, quantized),
        *unmeasured_toolkit(toolkit, target, quantized),
        *signature(analysis.model, toolkit),
        *analysis.graph_findings,
        *long_io_names(analysis.model, target),
        *unused_graph_inputs(
            analysis.model, analysis.facts, target, quantized, names_inputs=not analysis.declared_static
        ),
        *shape_only_graph_inputs(analysis.model, analysis.facts, target, quantized),
        *conv1d_grouped_mean(analysis.graph, analysis.facts),
        *folded_ifs(analysis.graph, analysis.facts),
        *pad_fused_into_conv(analysis.graph, analysis.facts),
        *dequantized_gelu(analysis.graph, analysis.facts),
        *quantized_matmul_float_residual(analysis.graph, analysis.facts),
        *quantized_float_join(analysis.graph, analysis.facts),
        *prequantized_quantized_build(analysis.graph, analysis.facts, target, quantized),
        *quantized_yolov5_head(analysis.graph, analysis.facts, target, quantized),
        *duplicate_opset_import(analysis.model, analysis.graph, analysis.facts),
        *elementwise_const_rank5(analysis.graph, analysis.facts),
        *yolov8_dfl_split(analysis.graph, analysis.facts, analysis.opset),
        *gemm_column_product(analysis.graph, analysis.facts, target, quantized),
        *gemm_column_sum(analysis.graph, analysis.facts),
        *node_findings(analysis.graph, analysis.facts, target, toolkit, analysis.opset, seen),
        *attention_bare_query(analysis.graph, analysis.facts, target),
        *attention_softmax_identity(analysis.graph, analysis.facts, target),
        *quantized_integer_divisor(analysis.graph, analysis.facts, target),
        *quantized_integer_only(analysis.graph, analysis.facts, target, quantized),
        *analysis.onnxruntime_findings,
        *fp16_range(output_ranges or {}),
    ]
    return CheckReport(
        model=path.name,
        target=target,
        toolkit=toolkit,
        nodes=len(analysis.graph.node),
        seconds=time.perf_counter() - start,
        findings=findings,
    )


def warm_up() -> None:
    """What a first check loads besides this module: onnxruntime (the probe) and the default
    toolkit's op table (see `baseline.runtime.isolated.WARM_UP`). Not the table while a hinted session
    is being built: the first check reads it while it waits for that session anyway, and
    parsing it now would take the CPU the build needs."""
    import onnxruntime  # noqa: F401

    if not session_building():
        was_measured(DEFAULT_TOOLKIT_VERSION)  # parses the table; builds are made per op when read


def analyse(path: Path, shapes: Mapping[str, list[int]]) -> ModelAnalysis:
    """The target-independent analysis, shared by the checks of one model's targets. Keyed by
    the file's bytes (`file_key`), not its name: a rewritten file is a new model."""
    global _last
    key = (str(path.absolute()), file_key(path), repr(sorted(shapes.items())))
    with _guard:
        if _last is not None and _last[0] == key:
            return _last[1]
        _last = None  # free the previous model before loading the next
        analysis = _analyse(path, shapes)
        _last = (key, analysis)
        return analysis


def _whole(path: Path, shapes: Mapping[str, list[int]]) -> onnx.ModelProto:
    model = load_onnx_structure(path)
    fix_input_shapes(model, shapes)
    return model


def _analyse(path: Path, shapes: Mapping[str, list[int]]) -> ModelAnalysis:
    build_in_background(path)  # the probe's session (`runs_in_onnxruntime`), built meanwhile
    model, cleared = load_weightless(path)
    check_external_data(model, path)  # missing or escaping weights: refused as `lock` refuses them
    declared_static = inputs_static(model)
    fix_input_shapes(model, shapes)
    inferred = infer_shapes(model, path, whole=functools.partial(_whole, path, shapes) if cleared else None)
    facts = graph_facts(inferred, model)
    return ModelAnalysis(
        model=model,
        graph=inferred.graph,
        facts=facts,
        opset=next((e.version for e in model.opset_import if e.domain in ("", "ai.onnx")), 0),
        graph_findings=[
            *dynamic_inputs(model),
            *conflicting_value_info(model.graph),
            *io_types(model),
            *old_op_versions(model),
            *constant_outputs(inferred.graph, facts.constant),
        ],
        path=path,
        shapes=shapes,
        declared_static=declared_static,
    )
