"""Gate behaviour on the demo project, called through the library (no CLI)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from baseline.files.tensors import load_tensors, save_npz
from baseline.gates import apply_expectation
from baseline.gates.consistency import ConsistencyMetrics
from baseline.models.intent import ExpectedFailure
from baseline.models.results import GateResult, Status
from baseline.project.layout import Project
from baseline.project.lockfile import load_lock
from baseline.verification.verify import verify_project
from tests.conftest import LOCK, tensor_file

pytestmark = pytest.mark.toolkit  # every test here drives the real toolkit


def results(root: Path, model: str) -> dict[tuple[str, str | None], GateResult]:
    report = verify_project(Project.locate(root / LOCK), [model])
    return {(r.gate, r.backend): r for r in report.results}


def test_consistency_fails_with_numbers_when_golden_tensors_change(demo: Path) -> None:
    path = tensor_file(demo, "detector", "outputs.onnxruntime")
    golden = load_tensors(path)
    golden["detections"] = golden["detections"] + np.float32(0.01)
    save_npz(path, golden)
    result = results(demo, "detector")[("consistency", "onnxruntime")]
    assert result.status == Status.FAIL
    assert "of 9600 elements" in result.details[0] and "max abs 0.01" in result.details[0]
    assert isinstance(result.metrics, ConsistencyMetrics)
    assert (result.metrics.outputs["detections"].max_abs or 0.0) > 0.009


def test_corrupt_reference_npz_is_an_error_result_not_a_crash(demo: Path) -> None:
    path = tensor_file(demo, "classifier", "outputs.onnxruntime")
    path.write_bytes(b"PK\x03\x04 broken")
    by_gate = results(demo, "classifier")
    assert by_gate[("integrity", None)].status == Status.FAIL
    assert by_gate[("consistency", "onnxruntime")].status == Status.ERROR
    assert "not a readable" in by_gate[("consistency", "onnxruntime")].summary
    assert by_gate[("drift", "onnxruntime")].status == Status.PASS


def test_static_gate_names_node_and_remedy(demo: Path) -> None:
    static = results(demo, "nms_head")[("static", None)]
    assert static.status == Status.XFAIL
    assert "node 'nms' (NonMaxSuppression)" in static.summary and "cut the graph" in static.summary


def test_lock_pins_tolerances_per_output(demo: Path) -> None:
    classifier = load_lock(demo / LOCK).model("classifier")
    assert classifier is not None
    assert classifier.tolerances["probs"].drift.atol == 1e-6
    assert classifier.tolerances["logits"].drift.atol == 1e-5


def make_result(status: Status, gate: str = "static", target: str | None = None) -> GateResult:
    return GateResult(model="m", gate=gate, status=status, summary="s", target=target)


def test_expected_failures_are_strict(demo: Path) -> None:
    model = load_lock(demo / LOCK).model("nms_head")
    assert model is not None
    assert apply_expectation(model, make_result(Status.FAIL)).status == Status.XFAIL
    unexpected_pass = apply_expectation(model, make_result(Status.PASS))
    assert unexpected_pass.status == Status.FAIL and "expects it to fail" in unexpected_pass.summary
    assert apply_expectation(model, make_result(Status.FAIL, gate="drift")).status == Status.FAIL


def test_expected_failure_can_name_a_target(demo: Path) -> None:
    model = load_lock(demo / LOCK).model("nms_head")
    assert model is not None
    scoped = model.model_copy(
        update={"expect_fail": [ExpectedFailure(gate="static", reason="r", target="rk3566")]}
    )
    assert apply_expectation(scoped, make_result(Status.FAIL, target="rk3588")).status == Status.FAIL
    assert apply_expectation(scoped, make_result(Status.FAIL, target="rk3566")).status == Status.XFAIL
