"""Gates: one module each, registered here in running order (see `contract` for the shape).

A failed check is a result with numbers and a hint. An exception means the gate could
not run; `run_gate` turns baseline's own exceptions into an `error` result so that the
other gates and models still run.
"""

from __future__ import annotations

from baseline.errors import BaselineError, EnvironmentBroken
from baseline.gates import (
    advice,
    artifact,
    compat,
    compilable,
    consistency,
    drift,
    integrity,
    labels,
    static,
    task,
)
from baseline.gates.context import VerifyContext
from baseline.gates.contract import Gate, GateInputs, GateJob, Reads, model_view
from baseline.models.intent import ExpectedFailure, expected_failure
from baseline.models.lock import ModelLock
from baseline.models.results import GateResult, Status

GATES: tuple[Gate, ...] = (integrity, static, compat, compilable, artifact, consistency, task, labels, drift)
"""In running order: cheap checks first."""

GATES_BY_NAME: dict[str, Gate] = {gate.NAME: gate for gate in GATES}


def declared_reads(view: ModelLock, job: GateJob) -> Reads:
    """What a check of `job` reads, by its gate's own declaration; `view` is
    `model_view(model, job.backend, job.target)`, which the caller may share between checks."""
    return GATES_BY_NAME[job.gate].reads(view, job)


def run_gate(model: ModelLock, job: GateJob, ctx: VerifyContext) -> GateResult:
    """One check, given only what its gate declared; expected failures applied."""
    gate = GATES_BY_NAME[job.gate]
    view = model_view(model, job.backend, job.target)
    inputs = GateInputs(ctx, view, job, gate.reads(view, job))
    try:
        result = gate.check(job, inputs)
    except EnvironmentBroken:
        raise  # no gate of any model can run: one line, exit 2
    except BaselineError as error:
        result = inputs.errored(f"could not run: {error}")
    return apply_expectation(model, result, changed=_passed_on_a_changed_model(model, result, inputs))


def _passed_on_a_changed_model(model: ModelLock, result: GateResult, inputs: GateInputs) -> bool:
    """Whether a check expected to fail passed on an ONNX file other than the pinned one: asked
    only then (hashing the model for every passing check would cost `lock --check` its speed),
    and only of gates that declare the pin."""
    if result.status != Status.PASS or advice.ONNX_KEY not in inputs.declared.files:
        return False
    if expected_failure(model.expect_fail, result.gate, result.target) is None:
        return False
    return advice.model_changed(inputs)


def apply_expectation(model: ModelLock, result: GateResult, *, changed: bool = False) -> GateResult:
    """Turn an expected failure into `xfail`, and an unexpected pass into a failure (strict);
    `changed`: the model's file is not the pinned one, so a pass is no sign that it was fixed."""
    expected = expected_failure(model.expect_fail, result.gate, result.target)
    if expected is None or result.status == Status.SKIP:
        return result
    if expected.against is not None and isinstance(result.metrics, task.TaskMetrics):
        return _expected_against(model, result, result.metrics, expected, changed)
    if result.status in (Status.FAIL, Status.ERROR):
        return result.but(
            status=Status.XFAIL, summary=f"expected failure ({expected.reason}): {result.summary}"
        )
    return _unexpected_pass(model, result, expected, changed)


def _expected_against(
    model: ModelLock, result: GateResult, metrics: task.TaskMetrics, expected: ExpectedFailure, changed: bool
) -> GateResult:
    """A task result whose comparison with onnxruntime is expected to fail: the comparison with the
    build's own locked outputs (the `task` table) is still judged as usual."""
    own = [check for check in metrics.failed if check.table == "task"]
    if own:
        return result.but(
            summary=f"{result.summary} (the expect_fail covers the comparison with "
            f"{expected.against} only: this build changed against its own locked outputs)",
            hint="if the new behaviour is intended, run `baseline accept MODEL --reason ...`",
        )
    if metrics.failed:
        return result.but(
            status=Status.XFAIL,
            summary=f"expected failure against {expected.against} ({expected.reason}); "
            f"unchanged against its own locked outputs: {result.summary}",
        )
    return _unexpected_pass(model, result, expected, changed)


def _unexpected_pass(
    model: ModelLock, result: GateResult, expected: ExpectedFailure, changed: bool
) -> GateResult:
    """An expected failure that did not happen fails: the intent file is out of date, or, when
    the model changed since the lock, the change is the cause (a detector broken in onnxruntime
    too finds nothing on either side, and its int8 build's task then passes)."""
    fixed = "remove the expect_fail entry for this gate if the model is fixed"
    return result.but(
        status=Status.FAIL,
        summary=f"passed, but the intent file expects it to fail ({expected.reason})",
        hint=advice.changed_model(model) if changed else fixed,
    )


__all__ = [
    "GATES",
    "GATES_BY_NAME",
    "Gate",
    "GateJob",
    "VerifyContext",
    "apply_expectation",
    "declared_reads",
    "run_gate",
]
