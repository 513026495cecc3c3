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
    dynamic_inputs,
    fp16_range,
    io_types,
    old_op_versions,
    runs_in_onnxruntime,
    signature,
)
from baseline.static_check.node_rules import node_findings


def check_model(
    path: Path,
    target: str = "rk3588",
    toolkit: str = DEFAULT_TOOLKIT_VERSION,
    shapes: Mapping[str, list[int]] | None = None,
    output_ranges: Mapping[str, float] | None = None,
) -> CheckReport:
    """Every finding for `path` built for `target` by `toolkit`; `shapes` fixes symbolic dims,
    `output_ranges` (largest |value| per output, from reference runs) enables the fp16 check."""
    start = time.perf_counter()
    model = load_onnx_structure(path)
    fix_input_shapes(model, shapes or {})
    inferred = infer_shapes(model, path)
    graph = inferred.graph
    findings = [
        *signature(model, toolkit),
        *dynamic_inputs(model),
        *io_types(model),
        *old_op_versions(model),
        *node_findings(graph, graph_facts(inferred, model), target, toolkit),
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
