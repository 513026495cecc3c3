"""Drift gate: do a backend's output statistics stay within tolerance of the locked baseline?"""

from __future__ import annotations

from typing import Any

from baseline.gates.context import GateJob, VerifyContext, pending_result
from baseline.models.lock import ModelLock, ReferencePin
from baseline.models.results import GateResult, Status
from baseline.models.tensors import TensorStats
from baseline.models.tolerances import DriftTolerance

NAME = "drift"


def jobs(model: ModelLock) -> list[GateJob]:
    return [GateJob(NAME, backend=ref.backend, target=ref.target) for ref in model.references]


def check(model: ModelLock, job: GateJob, ctx: VerifyContext) -> GateResult:
    from baseline import compare  # numpy: only when outputs are really compared

    assert job.backend is not None
    reference = model.reference(job.backend, job.target)
    result = pending_result(model, NAME, job)
    if reference is None:
        return result.model_copy(update={"status": Status.SKIP, "summary": "no locked reference"})
    run = ctx.run(model, job.backend, job.target)
    if run.build is not None and not run.build.compiled:
        return result.model_copy(update={"status": Status.SKIP, "summary": "not built; see compilable"})
    if run.outputs is None:
        return result.model_copy(update={"status": Status.ERROR, "summary": f"no outputs: {run.error}"})
    candidates = {name: compare.tensor_stats(name, array) for name, array in run.outputs.items()}
    details, metrics = _compare_outputs(model, reference, candidates)
    if not details:
        return result.model_copy(
            update={
                "metrics": metrics,
                "summary": f"{len(reference.outputs)} outputs within tolerance "
                f"(worst {_worst(metrics):.2g}× allowed)",
            }
        )
    return result.model_copy(
        update={
            "status": Status.FAIL,
            "metrics": metrics,
            "details": details,
            "summary": f"{len(details)} statistics drifted; first: {details[0]}",
            "hint": "if the change is intended, run `baseline lock` to take the new baseline",
        }
    )


def _compare_outputs(
    model: ModelLock, reference: ReferencePin, candidates: dict[str, TensorStats]
) -> tuple[list[str], dict[str, Any]]:
    details: list[str] = []
    metrics: dict[str, Any] = {}
    for baseline in reference.outputs:
        candidate = candidates.get(baseline.name)
        if candidate is None:
            details.append(f"output {baseline.name!r} is missing")
            continue
        tolerance = (
            model.tolerances[baseline.name].drift if baseline.name in model.tolerances else DriftTolerance()
        )
        lines, ratio = _compare_output(baseline, candidate, tolerance)
        details += lines
        metrics[baseline.name] = {
            "worst_ratio": ratio,
            "candidate": candidate.model_dump(exclude={"name"}),
        }
    return details, metrics


def _compare_output(
    baseline: TensorStats, candidate: TensorStats, tolerance: DriftTolerance
) -> tuple[list[str], float]:
    from baseline import compare

    name = baseline.name
    lines = [
        f"output {name!r} {field}: baseline {old} → {new}"
        for field in ("shape", "dtype", "nan", "inf")
        if (old := getattr(baseline, field)) != (new := getattr(candidate, field))
    ]
    deltas = compare.stat_deltas(baseline, candidate, tolerance)
    lines += [
        f"output {name!r} {d.statistic}: baseline {_fmt(d.baseline)} → {_fmt(d.candidate)} "
        f"(|Δ| {_delta(d.baseline, d.candidate)} > allowed {d.allowed:.3g} = "
        f"atol {tolerance.atol:g} + rtol {tolerance.rtol:g}·|baseline|)"
        for d in deltas
        if d.exceeded
    ]
    return lines, max(d.ratio for d in deltas)


def _fmt(value: float | None) -> str:
    return "none" if value is None else f"{value:.6g}"


def _delta(old: float | None, new: float | None) -> str:
    return "n/a" if old is None or new is None else f"{abs(new - old):.3g}"


def _worst(metrics: dict[str, Any]) -> float:
    return max((entry["worst_ratio"] for entry in metrics.values()), default=0.0)
