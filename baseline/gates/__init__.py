"""Gates: one module each, same shape — `jobs(model)` and `check(model, job, ctx) -> GateResult`.

A failed check is a result with numbers and a hint. An exception means the gate could
not run; `run_gate` turns baseline's own exceptions into an `error` result so that the
other gates and models still run.
"""

from __future__ import annotations

from types import ModuleType

from baseline.errors import BaselineError
from baseline.gates import artifact, compat, compilable, consistency, drift, integrity, static
from baseline.gates.context import GateJob, VerifyContext
from baseline.models.lock import ModelLock
from baseline.models.results import GateResult, Status

GATES: tuple[ModuleType, ...] = (integrity, static, compat, compilable, artifact, consistency, drift)
"""In running order: cheap checks first."""


def run_gate(gate: ModuleType, model: ModelLock, job: GateJob, ctx: VerifyContext) -> GateResult:
    try:
        result: GateResult = gate.check(model, job, ctx)
    except BaselineError as error:
        result = GateResult(
            model=model.name,
            gate=job.gate,
            backend=job.backend,
            target=job.target,
            status=Status.ERROR,
            summary=f"could not run: {error}",
        )
    return apply_expectation(model, result)


def apply_expectation(model: ModelLock, result: GateResult) -> GateResult:
    """Turn an expected failure into `xfail`, and an unexpected pass into a failure (strict)."""
    expected = next(
        (
            e
            for e in model.expect_fail
            if e.gate == result.gate and (e.target is None or e.target == result.target)
        ),
        None,
    )
    if expected is None or result.status == Status.SKIP:
        return result
    if result.status in (Status.FAIL, Status.ERROR):
        return result.model_copy(
            update={
                "status": Status.XFAIL,
                "summary": f"expected failure ({expected.reason}): {result.summary}",
            }
        )
    return result.model_copy(
        update={
            "status": Status.FAIL,
            "summary": f"passed, but the intent file expects it to fail ({expected.reason})",
            "hint": "remove the expect_fail entry for this gate if the model is fixed",
        }
    )


__all__ = ["GATES", "GateJob", "VerifyContext", "apply_expectation", "run_gate"]
