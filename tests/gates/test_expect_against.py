"""`expect_fail` with `against = "onnxruntime"`: an int8 build declared inaccurate against the float
model is still judged against its own locked outputs, so its regressions stay visible."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from baseline.gates import apply_expectation
from baseline.gates.task import TaskCheck, TaskMetrics
from baseline.models.intent import ExpectedFailure
from baseline.models.lock import ModelLock
from baseline.models.results import GateResult, Status
from baseline.models.task import TaskOutcome
from baseline.project.lockfile import load_lock
from baseline.verification.excuses import model_warnings
from tests.conftest import REPO

OWN, GOLDEN = ("locked rknn-sim/rk3588-w8a8", "task"), ("onnxruntime today", "golden_quantized")


def model(against: str | None) -> ModelLock:
    lock = load_lock(REPO / "lockfiles" / "demo" / "baseline.lock").model("classifier")
    assert lock is not None
    expected = ExpectedFailure.model_validate(
        {"gate": "task", "reason": "w8a8 scores collapse", "target": "rk3588-w8a8", "against": against}
    )
    return lock.model_copy(update={"expect_fail": [expected]})


def task_result(*failing: tuple[str, str]) -> GateResult:
    checks = [
        TaskCheck(
            against=against,
            table=table,
            outcome=TaskOutcome(
                kind="classification",
                output="probs",
                passed=(against, table) not in failing,
                summary="top-1 differs on 1 of 2 samples" if (against, table) in failing else "same",
                failures=["sample 0: class 7 'cat' became class 3 'dog'"]
                if (against, table) in failing
                else [],
            ),
        )
        for against, table in (OWN, GOLDEN)
    ]
    return GateResult(
        model="classifier",
        gate="task",
        status=Status.FAIL if failing else Status.PASS,
        summary=f"{len(failing)} task comparison(s) failed" if failing else "unchanged",
        target="rk3588-w8a8",
        backend="rknn-sim",
        metrics=TaskMetrics(checks=checks),
    )


def test_the_comparison_with_onnxruntime_is_expected_and_the_locked_one_still_judged() -> None:
    against = model("onnxruntime")
    assert apply_expectation(against, task_result(GOLDEN)).status == Status.XFAIL
    regression = apply_expectation(against, task_result(GOLDEN, OWN))
    assert regression.status == Status.FAIL
    assert "changed against its own locked outputs" in regression.summary
    assert regression.hint is not None and "baseline accept" in regression.hint
    assert apply_expectation(against, task_result(OWN)).status == Status.FAIL
    fixed = apply_expectation(against, task_result())
    assert fixed.status == Status.FAIL and "expects it to fail" in fixed.summary


def test_without_against_the_whole_gate_is_expected_to_fail_as_before() -> None:
    assert apply_expectation(model(None), task_result(GOLDEN, OWN)).status == Status.XFAIL


def test_lock_and_verify_warn_that_an_excuse_without_against_hides_a_regression() -> None:
    """The regression above, xfail without `against`: said beside the results, with the fix."""
    excused = [line for line in model_warnings(model(None)) if "expect_fail" in line]
    assert len(excused) == 1 and "model 'classifier'" in excused[0]
    assert "task gate on rk3588-w8a8 has no `against`" in excused[0]
    assert 'add against = "onnxruntime" to that entry' in excused[0]
    assert not [line for line in model_warnings(model("onnxruntime")) if "expect_fail" in line]


def test_against_is_refused_on_gates_that_compare_with_nothing() -> None:
    with pytest.raises(ValidationError, match="task and consistency gates only"):
        ExpectedFailure(gate="compilable", reason="r", against="onnxruntime")


def test_an_expected_failure_that_passes_after_the_model_changed_blames_the_change() -> None:
    """Team run 17: mahjong-detector's YOLO11n, its rv1106-w8a8 task declared failing (int8 zeroed
    every class score). A middle Conv's weight halved, onnxruntime found nothing either, so the
    task passed and verify said "remove the expect_fail entry ... if the model is fixed": the model
    was broken, not fixed. A changed model's unexpected pass gets the changed model's advice."""
    against = model("onnxruntime")
    changed = apply_expectation(against, task_result(), changed=True)
    assert changed.status == Status.FAIL and "expects it to fail" in changed.summary
    assert changed.hint is not None and "the model changed since the lock" in changed.hint
    assert "remove the expect_fail" not in changed.hint
    unchanged = apply_expectation(against, task_result())
    assert unchanged.hint is not None and "remove the expect_fail" in unchanged.hint
