"""Compilable gate: does the real toolkit load, build and export the model for the target?

The verdict comes from return codes, exceptions and crashes; the classified log explains
it. A crash or a hang of the toolkit is an `error` (the gate could not decide), reported
with the log tail.
"""

from __future__ import annotations

from collections import Counter

from baseline.backends import SIMULATOR
from baseline.backends.base import BuildReport
from baseline.gates.context import GateJob, VerifyContext, pending_result
from baseline.models.lock import ModelLock
from baseline.models.results import Diagnostic, GateResult, Status

NAME = "compilable"
SHOWN = ("error", "warning", "unknown-error", "unknown-warning")


def jobs(model: ModelLock) -> list[GateJob]:
    if SIMULATOR not in model.backends:
        return []
    return [GateJob(NAME, backend=SIMULATOR, target=target.name) for target in model.targets]


def check(model: ModelLock, job: GateJob, ctx: VerifyContext) -> GateResult:
    assert job.backend is not None
    run = ctx.run(model, job.backend, job.target)
    result = pending_result(model, NAME, job)
    build = run.build
    if build is None:
        return result.model_copy(update={"status": Status.ERROR, "summary": f"could not run: {run.error}"})
    shown = [d for d in build.diagnostics if d.severity in SHOWN]
    update = {"metrics": _metrics(build), "details": [d.line() for d in shown]}
    if build.crashed:
        return result.model_copy(
            update={
                **update,
                "status": Status.ERROR,
                "summary": f"toolkit crashed: {build.error}",
                "details": [*update["details"], "log tail:", *build.log_tail],
                "hint": "the native compiler died on this graph; bisect it with load_onnx(outputs=[...])",
            }
        )
    if not build.compiled:
        cause = _cause(build.diagnostics)
        return result.model_copy(
            update={
                **update,
                "status": Status.FAIL,
                "summary": f"{build.stage} failed: {build.error}" + (f" ({cause.cause})" if cause else ""),
                "hint": cause.remedy if cause and cause.remedy else "see the toolkit log lines above",
            }
        )
    unknown_errors = [d for d in build.diagnostics if d.severity == "unknown-error"]
    if unknown_errors and model.toolkit.unknown_errors == "fail":
        return result.model_copy(
            update={
                **update,
                "status": Status.FAIL,
                "summary": f"built, but {len(unknown_errors)} unrecognised error lines "
                f"(policy toolkit.unknown_errors = 'fail'): {unknown_errors[0].message}",
                "hint": "set toolkit.unknown_errors = 'warn' if these lines are harmless",
            }
        )
    return result.model_copy(update={**update, "summary": _success(build, model, job)})


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


def _metrics(build: BuildReport) -> dict[str, object]:
    counts = Counter(d.severity for d in build.diagnostics)
    return {
        "stage": build.stage,
        "seconds": build.seconds,
        "diagnostics": dict(counts),
        "rules": sorted({d.rule for d in build.diagnostics}),
    }
