"""Static gate: is the model predicted to compile for each target? Needs only onnx, runs first.

The checker is `baseline.static_check`; this gate feeds it the fixtures' shapes (which
fix symbolic dims the way the converter will) and the golden outputs' largest values
(for the fp16-overflow warning on fp16 targets).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baseline.backends import GOLDEN
from baseline.gates.contract import GateInputs, GateJob, Reads
from baseline.models.lock import ModelLock
from baseline.models.results import GateMetrics, GateResult, Headline, Status

if TYPE_CHECKING:  # onnx: imported only when the gate runs
    from pathlib import Path

    from baseline.models.intent import ToolkitSettings
    from baseline.static_check.findings import CheckReport, StaticFinding

NAME = "static"


class StaticMetrics(GateMetrics):
    gate = NAME

    findings: int
    errors: int
    """Errors that decide "does not compile" (a node-test-only error makes the verdict unknown)."""
    nodes: int
    rules: list[str]
    seconds: float
    verdict: str | None = None
    """compiles, fails or unknown (None in results cached before it was kept)."""

    def headline(self) -> Headline:
        return Headline("errors", float(self.errors), 0.0, "≤")


def jobs(model: ModelLock) -> list[GateJob]:
    return [GateJob(NAME, target=target.name) for target in model.targets]


def reads(model: ModelLock, job: GateJob) -> Reads:
    return Reads(files=frozenset({"onnx", "fixtures"}))


def predict(
    onnx_path: Path,
    model: str,
    platform: str,
    toolkit: ToolkitSettings,
    shapes: dict[str, list[int]],
    output_ranges: dict[str, float] | None,
    quantized: bool,
) -> CheckReport:
    """`baseline.static_check.check_model` for one build, in the isolated helper: shape inference
    and the onnxruntime probe execute the graph, and a hostile one never returns. `shapes` are
    ONNX-layout shapes (image fixtures are stored NHWC: `images.onnx_shapes`)."""
    from baseline.runtime.isolated import run_limited

    return run_limited(  # type: ignore[no-any-return]
        "baseline.static_check:check_model",  # onnx is imported by the helper only
        # the helper has its own working directory
        (onnx_path.absolute(), platform, toolkit.version, shapes, output_ranges, quantized),
        toolkit.onnx_timeout,
        f"model {model!r}: the static check",
        "raise toolkit.onnx_timeout in the intent file if the model is only slow",
    )


def check(job: GateJob, inputs: GateInputs) -> GateResult:
    from baseline.files.images import onnx_shapes

    assert job.target is not None
    model = inputs.model
    target = model.target(job.target)
    report = predict(
        inputs.path("onnx"),
        model.name,
        target.platform,
        model.toolkit,
        onnx_shapes(inputs.tensors("fixtures"), model.fixtures.feed),
        None if target.quantized else _golden_ranges(model),
        target.quantized,
    )
    errors = report.errors()
    metrics = StaticMetrics(
        findings=len(report.findings),
        errors=sum(1 for f in errors if f.decisive),  # those that decide "fails" (issue 33)
        nodes=report.nodes,
        rules=sorted({f.rule for f in report.findings}),
        seconds=round(report.seconds, 4),
        verdict=report.verdict,
    )
    details = [f.line() for f in report.findings]
    if report.verdict != "fails":  # no error, or none strong enough to decide alone: unknown
        return inputs.result(
            metrics,
            summary=_verdict(report.nodes, report.verdict, report.findings, report.reason),
            details=details,
        )
    decisive = [f for f in errors if f.decisive]
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return inputs.failed(
        f"predicted not to compile: {decisive[0].line()}{more}",
        details=details,
        hint=decisive[0].remedy,
        metrics=metrics,
    )


def outranked(prediction: GateResult, compiled: bool, declared: bool = False) -> GateResult:
    """The prediction as the report shows it once the real toolkit converted the same model for
    the same target: a "does not compile" that the compiler contradicted never fails the model
    (the compiler's verdict is the one that counts, and `compilable` reports it); the summary
    says the prediction was wrong and which rules made it.

    `declared`: the intent expects this build to fail (`expect_fail` on compilable) and it did.
    A "does not compile" that agrees is then expected too: the team already declared what the
    compiler confirmed, and a new rule of the checker seeing it is no regression of the model
    (measured: a rule for an unread graph input turned an unchanged, declared model red)."""
    if prediction.status != Status.FAIL:
        return prediction
    if not compiled and declared and _predicts_failure(prediction):
        return prediction.but(
            status=Status.XFAIL,
            summary=f"expected failure (the toolkit did not build it either, as the intent "
            f"declares for compilable): {prediction.summary}",
        )
    if not compiled:
        return prediction
    rules = ", ".join(prediction.metrics.rules) if isinstance(prediction.metrics, StaticMetrics) else "?"
    return prediction.but(
        status=Status.PASS,
        summary=f"compiled for real, so the prediction was wrong ({prediction.summary}); rules: {rules}",
        hint=None,
    )


def _predicts_failure(prediction: GateResult) -> bool:
    """A "does not compile" verdict, not an unexpected pass of an `expect_fail` on static."""
    return isinstance(prediction.metrics, StaticMetrics) and prediction.metrics.verdict == "fails"


def _golden_ranges(model: ModelLock) -> dict[str, float]:
    golden = model.reference(GOLDEN, None)
    if golden is None:
        return {}
    return {s.name: max(abs(s.min or 0.0), abs(s.max or 0.0)) for s in golden.outputs}


def _verdict(nodes: int, verdict: str, findings: list[StaticFinding], reason: str = "") -> str:
    """A model the checker cannot judge is said to be unknown, never "predicted to compile":
    the compilable gate, which runs the real toolkit, decides it."""
    if verdict == "unknown":
        return f"{nodes} nodes, cannot predict: {reason} (the compilable gate decides)"
    warnings = f" ({len(findings)} warnings)" if findings else ""
    return f"{nodes} nodes, predicted to compile{warnings}"
