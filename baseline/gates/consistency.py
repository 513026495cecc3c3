"""Consistency gate: does a backend reproduce the golden onnxruntime outputs on the fixtures?

The golden tensors are the locked onnxruntime outputs, so verify never needs to rerun
onnxruntime to judge the simulator or a board. For onnxruntime itself the gate proves
that today's run still matches the locked tensors element by element.
"""

from __future__ import annotations

from typing import Any

from baseline.backends import GOLDEN
from baseline.compare import compare_tensors
from baseline.gates.context import GateJob, VerifyContext
from baseline.models.lock import ModelLock
from baseline.models.results import GateResult, Status
from baseline.models.tensors import TensorComparison
from baseline.models.tolerances import ConsistencyTolerance

NAME = "consistency"


def jobs(model: ModelLock) -> list[GateJob]:
    return [GateJob(NAME, backend=ref.backend, target=ref.target) for ref in model.references]


def check(model: ModelLock, job: GateJob, ctx: VerifyContext) -> GateResult:
    assert job.backend is not None
    result = GateResult(
        model=model.name,
        gate=NAME,
        backend=job.backend,
        target=job.target,
        status=Status.PASS,
        summary="",
    )
    golden_pin = model.reference(GOLDEN, None)
    if golden_pin is None:
        return result.model_copy(
            update={"status": Status.SKIP, "summary": "no locked golden outputs"}
        )
    run = ctx.run(model, job.backend, job.target)
    if run.outputs is None:
        return result.model_copy(
            update={"status": Status.ERROR, "summary": f"no outputs: {run.error}"}
        )
    golden = ctx.tensors(golden_pin.tensors, f"models.{model.name}.references.{GOLDEN}")
    comparisons, failures = [], []
    for name, expected in golden.items():
        tolerance = _tolerance(model, name)
        if name not in run.outputs:
            failures.append(f"output {name!r} is missing from {job.backend}")
            continue
        comparison = compare_tensors(
            name, run.outputs[name], expected, tolerance.atol, tolerance.rtol
        )
        comparisons.append(comparison)
        failures += _failures(comparison, tolerance)
    metrics = {c.name: _metrics(c) for c in comparisons}
    if not failures:
        worst = min((c.cosine for c in comparisons if c.cosine is not None), default=1.0)
        return result.model_copy(
            update={
                "metrics": metrics,
                "summary": f"{len(comparisons)} outputs agree with {GOLDEN} "
                f"(min cosine {worst:.6f})",
            }
        )
    return result.model_copy(
        update={
            "status": Status.FAIL,
            "metrics": metrics,
            "details": failures,
            "summary": f"{len(failures)} disagreements with {GOLDEN}; first: {failures[0]}",
            "hint": "if this accuracy is acceptable, loosen [models.tolerances] in the intent file",
        }
    )


def _tolerance(model: ModelLock, output: str) -> ConsistencyTolerance:
    pinned = model.tolerances.get(output)
    return pinned.consistency if pinned is not None else ConsistencyTolerance()


def _failures(c: TensorComparison, tolerance: ConsistencyTolerance) -> list[str]:
    if not c.shape_match:
        return [f"output {c.name!r}: shape {c.candidate_shape} ≠ golden {c.golden_shape}"]
    failures = []
    new_non_finite = (c.candidate_nan + c.candidate_inf) - (c.golden_nan + c.golden_inf)
    if new_non_finite > 0:
        failures.append(
            f"output {c.name!r}: {c.candidate_nan} NaN and {c.candidate_inf} Inf "
            f"(golden has {c.golden_nan} and {c.golden_inf})"
        )
    if c.cosine is not None and c.cosine < tolerance.min_cosine:
        failures.append(f"output {c.name!r}: cosine {c.cosine:.6f} < {tolerance.min_cosine}")
    if c.mismatch_ratio > tolerance.max_mismatch_ratio:
        failures.append(
            f"output {c.name!r}: {c.mismatches} of {c.total} elements ({c.mismatch_ratio:.2%}) "
            f"differ beyond atol {c.atol:g} + rtol {c.rtol:g}·|golden| (allowed "
            f"{tolerance.max_mismatch_ratio:.2%}); max abs {_num(c.max_abs)}, "
            f"mean abs {_num(c.mean_abs)}, "
            f"max rel {_num(c.max_rel)}"
        )
    return failures


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _metrics(c: TensorComparison) -> dict[str, Any]:
    return c.model_dump(
        include={"cosine", "max_abs", "mean_abs", "max_rel", "mean_rel", "mismatches", "total"}
    )
