"""`check_model`: every rule, in the order the report lists their findings."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from baseline.models.intent import DEFAULT_TOOLKIT_VERSION
from baseline.onnx_facts import load_onnx_structure
from baseline.static_check.findings import CheckReport
from baseline.static_check.graph import fix_input_shapes, graph_facts, infer_shapes
from baseline.static_check.model_rules import (
    constant_outputs,
    dynamic_inputs,
    fp16_range,
    io_types,
    old_op_versions,
    quantized_only,
    runs_in_onnxruntime,
    signature,
    unmeasured_toolkit,
)
from baseline.static_check.node_rules import node_findings
from baseline.static_check.target_rules import long_io_names


def check_model(
    path: Path,
    target: str = "rk3588",
    toolkit: str = DEFAULT_TOOLKIT_VERSION,
    shapes: Mapping[str, list[int]] | None = None,
    output_ranges: Mapping[str, float] | None = None,
    quantized: bool | None = None,
) -> CheckReport:
    """Every finding for `path` built for `target` by `toolkit`; `shapes` fixes symbolic dims,
    `output_ranges` (largest |value| per output, from reference runs) enables the fp16 check,
    `quantized` says whether the build is quantized (None: as the op table measured the target)."""
    start = time.perf_counter()
    model = load_onnx_structure(path)
    fix_input_shapes(model, shapes or {})
    inferred = infer_shapes(model, path)
    graph = inferred.graph
    facts = graph_facts(inferred, model)
    opset = next((e.version for e in model.opset_import if e.domain in ("", "ai.onnx")), 0)
    findings = [
        *quantized_only(target, toolkit, quantized),
        *unmeasured_toolkit(toolkit, target, quantized),
        *signature(model, toolkit),
        *dynamic_inputs(model),
        *io_types(model),
        *long_io_names(model, target),
        *old_op_versions(model),
        *constant_outputs(graph, facts.constant),
        *node_findings(graph, facts, target, toolkit, opset),
        *runs_in_onnxruntime(model, path),
        *fp16_range(output_ranges or {}),
    ]
    return CheckReport(
        model=path.name,
        target=target,
        toolkit=toolkit,
        nodes=len(graph.node),
        seconds=time.perf_counter() - start,
        findings=findings,
    )
