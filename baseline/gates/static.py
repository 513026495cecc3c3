"""Static gate: does the ONNX graph hold what RKNN cannot compile? Needs only onnx.

This is the first, fast cut of the checker; rules come from the toolkit manuals and
from conversions measured with RKNN-Toolkit2 2.5.0 (see ../shared/reference).
"""

from __future__ import annotations

from dataclasses import dataclass

from baseline.gates.context import GateJob, VerifyContext
from baseline.models.lock import ModelLock, OnnxPin
from baseline.models.results import GateResult, Status

NAME = "static"

DATA_DEPENDENT_OPS = {
    "NonZero": "its output shape depends on the data",
    "NonMaxSuppression": "its output shape depends on the data",
    "Unique": "its output shape depends on the data",
    "Range": "its output shape depends on the data",
    "Loop": "control flow is not supported",
    "If": "control flow is not supported",
    "Scan": "control flow is not supported",
}
CUT_REMEDY = "cut the graph before it (load_onnx(outputs=[...])) and run that part on the CPU"
MAX_RANK = 4
MAX_DEFAULT_OPSET = 19
"""RKNN-Toolkit2 2.5.0 refuses opset 20 and above at load_onnx (measured)."""


@dataclass(frozen=True)
class Finding:
    rule: str
    where: str
    message: str
    remedy: str

    def line(self) -> str:
        return f"[{self.rule}] {self.where}: {self.message}; {self.remedy}"


def jobs(model: ModelLock) -> list[GateJob]:
    return [GateJob(NAME)]


def check(model: ModelLock, job: GateJob, ctx: VerifyContext) -> GateResult:
    from baseline.onnx_facts import load_onnx_structure

    structure = load_onnx_structure(ctx.project.pinned(model.onnx, f"models.{model.name}.onnx"))
    findings = _signature_findings(model.onnx) + _op_findings([node for node in structure.graph.node])
    metrics = {"findings": len(findings), "nodes": len(structure.graph.node)}
    if not findings:
        return GateResult(
            model=model.name,
            gate=NAME,
            status=Status.PASS,
            metrics=metrics,
            summary=f"{len(structure.graph.node)} nodes, nothing RKNN is known to reject",
        )
    return GateResult(
        model=model.name,
        gate=NAME,
        status=Status.FAIL,
        metrics=metrics,
        summary=f"predicted not to compile: {findings[0].line()}"
        + (f" (+{len(findings) - 1} more)" if len(findings) > 1 else ""),
        details=[finding.line() for finding in findings],
        hint=findings[0].remedy,
    )


def _signature_findings(onnx_pin: OnnxPin) -> list[Finding]:
    findings = []
    opset = onnx_pin.opsets.get("ai.onnx", 0)
    if opset > MAX_DEFAULT_OPSET:
        findings.append(
            Finding(
                "opset-too-new",
                "model",
                f"opset {opset} is above {MAX_DEFAULT_OPSET}",
                f"re-export at opset {MAX_DEFAULT_OPSET} or lower",
            )
        )
    for spec in [*onnx_pin.inputs, *onnx_pin.outputs]:
        if not spec.is_static and spec in onnx_pin.inputs:
            findings.append(
                Finding(
                    "dynamic-input",
                    f"input {spec.name!r}",
                    f"dims {spec.shape} are not fixed",
                    "export with fixed sizes or pass input_size_list to load_onnx",
                )
            )
        if len(spec.shape) > MAX_RANK:
            findings.append(
                Finding(
                    "rank-above-4",
                    f"tensor {spec.name!r}",
                    f"has {len(spec.shape)} dims",
                    "reshape to at most 4-D around the NPU part",
                )
            )
    return findings


def _op_findings(nodes: list) -> list[Finding]:  # type: ignore[type-arg]
    return [
        Finding(
            "unsupported-op",
            f"node {node.name or node.output[0]!r} ({node.op_type})",
            DATA_DEPENDENT_OPS[node.op_type],
            CUT_REMEDY,
        )
        for node in nodes
        if node.op_type in DATA_DEPENDENT_OPS
    ]
