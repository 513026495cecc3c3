"""Compilable gate: does the real toolkit load, build and export the model for the target?

The verdict comes from return codes, exceptions and crashes; the classified log explains
it. A crash or a hang of the toolkit is an `error` (the gate could not decide), reported
with the log tail.
"""

from __future__ import annotations

from collections import Counter

from baseline.backends import converter
from baseline.backends.base import BuildReport
from baseline.gates.contract import GateInputs, GateJob, Reads
from baseline.models.lock import ModelLock
from baseline.models.results import Diagnostic, GateMetrics, GateResult, Status

NAME = "compilable"
SHOWN = ("error", "warning", "unknown-error", "unknown-warning")


class CompilableMetrics(GateMetrics):
    gate = NAME

    stage: str
    seconds: dict[str, float]
    diagnostics: dict[str, int]
    """How many log lines of each severity."""
    rules: list[str]


def jobs(model: ModelLock) -> list[GateJob]:
    """One check per target, on the backend that converts (the simulator, or a board run
    through the toolkit); none for a model no listed backend converts."""
    backend = converter(model.backends)
    if backend is None:
        return []
    return [GateJob(NAME, backend=backend, target=target.name) for target in model.targets]


def reads(model: ModelLock, job: GateJob) -> Reads:
    assert job.backend is not None
    return Reads(runs=frozenset({(job.backend, job.target)}))


def check(job: GateJob, inputs: GateInputs) -> GateResult:
    assert job.backend is not None
    model = inputs.model
    run = inputs.run(job.backend, job.target)
    build = run.build
    if build is None:
        return inputs.errored(f"could not run: {run.error}")
    details = [d.line() for d in build.diagnostics if d.severity in SHOWN]
    metrics = _metrics(build)
    if build.crashed:
        return inputs.result(
            metrics,
            status=Status.ERROR,
            summary=f"toolkit crashed: {build.error}",
            details=[*details, "log tail:", *build.log_tail],
            hint="the native compiler died on this graph; bisect it with load_onnx(outputs=[...])",
        )
    if not build.compiled:
        cause = _cause(build.diagnostics)
        return inputs.failed(
            f"{build.stage} failed: {build.error}" + (f" ({cause.cause})" if cause else ""),
            details=details,
            hint=cause.remedy if cause and cause.remedy else "see the toolkit log lines above",
            metrics=metrics,
        )
    unknown_errors = [d for d in build.diagnostics if d.severity == "unknown-error"]
    if unknown_errors and model.toolkit.unknown_errors == "fail":
        return inputs.failed(
            f"built, but {len(unknown_errors)} unrecognised error lines "
            f"(policy toolkit.unknown_errors = 'fail'): {unknown_errors[0].message}",
            details=details,
            hint="set toolkit.unknown_errors = 'warn' if these lines are harmless",
            metrics=metrics,
        )
    return inputs.result(metrics, summary=_success(build, model, job), details=details)


COMPILED_STAGES = ("done", "init_runtime", "inference")
"""The last stage a build reached once load, build and export succeeded."""


def compiled(result: GateResult) -> bool:
    """Whether the toolkit built and exported the model in this check (whatever the verdict:
    an `unknown_errors = "fail"` policy or an expected failure may still fail it)."""
    return isinstance(result.metrics, CompilableMetrics) and result.metrics.stage in COMPILED_STAGES


def _cause(diagnostics: list[Diagnostic]) -> Diagnostic | None:
    """The most telling diagnostic: a known error pattern first, then anything unrecognised."""
    for severity in ("error", "unknown-error"):
        found = [d for d in diagnostics if d.severity == severity]
        if found:
            return found[-1]
    return None


def _success(build: BuildReport, model: ModelLock, job: GateJob) -> str:
    target = model.target(job.target) if job.target else None
    precision = target.quantization.dtype if target and target.quantization else "fp16"
    counts = Counter(d.severity for d in build.diagnostics)
    said = ", ".join(f"{n} {severity}" for severity, n in sorted(counts.items())) or "nothing"
    seconds = build.seconds.get("load", 0) + build.seconds.get("build", 0) + build.seconds.get("export", 0)
    return f"built {precision} for {target.platform if target else '?'} in {seconds:.2f} s; log: {said}"


def _metrics(build: BuildReport) -> CompilableMetrics:
    return CompilableMetrics(
        stage=build.stage,
        seconds=build.seconds,
        diagnostics=dict(Counter(d.severity for d in build.diagnostics)),
        rules=sorted({d.rule for d in build.diagnostics}),
    )
