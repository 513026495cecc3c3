"""The toolkit-backed gates on the demo project: compilable, artifact, consistency on rknn-sim."""

from __future__ import annotations

from pathlib import Path

import pytest

from baseline.backends.base import BackendRun, BuildReport
from baseline.gates import run_gate
from baseline.gates.artifact import ArtifactMetrics, contract_differences
from baseline.gates.consistency import ConsistencyMetrics
from baseline.gates.context import VerifyContext
from baseline.gates.contract import GateJob
from baseline.models.intent import ToolkitSettings
from baseline.models.results import GateResult, Status
from baseline.project.layout import Project
from baseline.project.lockfile import load_lock
from baseline.toolchain.diagnostics import parse_log
from baseline.verification.verify import verify_project
from tests.conftest import LOCK

pytestmark = pytest.mark.toolkit  # every test here drives the real toolkit


def results(root: Path, model: str) -> dict[tuple[str, str | None, str | None], GateResult]:
    report = verify_project(Project.locate(root / LOCK), [model])
    return {(r.gate, r.backend, r.target): r for r in report.results}


def test_uncompilable_model_quotes_the_toolkit_and_a_remedy(demo: Path) -> None:
    compilable = results(demo, "nms_head")[("compilable", "rknn-sim", "rk3588")]
    assert compilable.status == Status.XFAIL
    assert "ValueError: The input 0 of NonMaxSuppression('nms') need to be constant" in compilable.summary
    assert compilable.hint and "load_onnx(outputs=[...])" in compilable.hint
    assert any("[non-constant-shape-input]" in line for line in compilable.details)


def test_quantized_target_reports_consistency_numbers(demo: Path) -> None:
    by_key = results(demo, "classifier")
    quantized = by_key[("consistency", "rknn-sim", "rk3588-w8a8")]
    fp16 = by_key[("consistency", "rknn-sim", "rk3588")]
    assert quantized.status == Status.PASS and fp16.status == Status.PASS
    assert isinstance(quantized.metrics, ConsistencyMetrics) and isinstance(fp16.metrics, ConsistencyMetrics)
    quantized_logits, fp16_logits = quantized.metrics.outputs["logits"], fp16.metrics.outputs["logits"]
    assert 0.99 < quantized_logits.cosine < fp16_logits.cosine <= 1.0  # type: ignore[operator]
    assert quantized_logits.max_abs > fp16_logits.max_abs  # type: ignore[operator]


def test_fp16_overflow_fails_consistency_naming_the_first_divergent_layer(demo: Path) -> None:
    consistency = results(demo, "overflow")[("consistency", "rknn-sim", "rk3588")]
    assert consistency.status == Status.XFAIL  # marked as expected in the demo intent
    assert "NaN" in consistency.summary and "first divergent layer [Conv] scaled" in consistency.summary
    assert isinstance(consistency.metrics, ConsistencyMetrics)
    assert consistency.metrics.layers[0].op == "Input"


def test_reconversion_matches_the_locked_artifact(demo: Path) -> None:
    artifact = results(demo, "detector")[("artifact", "rknn-sim", "rk3588")]
    assert artifact.status == Status.PASS
    assert isinstance(artifact.metrics, ArtifactMetrics)
    assert artifact.metrics.fingerprint == artifact.metrics.locked_fingerprint


def test_a_lock_fingerprinted_with_fewer_bytes_masked_still_matches_its_own_artifact(demo: Path) -> None:
    """An older baseline masked fewer volatile bytes: the lock's fingerprint is not today's, but
    the pinned `.rknn` is the same model, so the reconversion matches it (no red on upgrade)."""
    lock_path = demo / LOCK
    text = lock_path.read_text()
    pinned = load_lock(lock_path).model("detector")
    assert pinned is not None and pinned.conversions[0].metadata.fingerprint is not None
    lock_path.write_text(text.replace(pinned.conversions[0].metadata.fingerprint, "e" * 64))
    artifact = results(demo, "detector")[("artifact", "rknn-sim", "rk3588")]
    assert artifact.status == Status.PASS, artifact.summary
    assert isinstance(artifact.metrics, ArtifactMetrics)
    assert artifact.metrics.locked_fingerprint == pinned.conversions[0].metadata.fingerprint


def test_io_contract_differences_are_named(demo: Path) -> None:
    classifier = load_lock(demo / LOCK).model("classifier")
    assert classifier is not None
    pin, fp16 = classifier.conversion("rk3588-w8a8"), classifier.conversion("rk3588")
    assert pin is not None and fp16 is not None
    lines = contract_differences(fp16.metadata, pin.metadata)
    assert "input 'image' dtype: locked float16 → now int8" in lines


def compilable_with_log(demo: Path, policy: str, line: str) -> GateResult:
    """The compilable gate on a build whose log held `line`, under an unknown-error policy."""
    lock = load_lock(demo / LOCK)
    detector = lock.model("detector")
    assert detector is not None
    model = detector.model_copy(update={"toolkit": ToolkitSettings(unknown_errors=policy)})
    build = BuildReport(
        compiled=True, stage="done", error=None, diagnostics=parse_log(line), log_tail=[], seconds={}
    )
    ctx = VerifyContext(project=Project.locate(demo / LOCK), lock=lock)
    ctx._runs.values[("detector", "rknn-sim", "rk3588")] = BackendRun(outputs={}, build=build)
    return run_gate(model, GateJob("compilable", "rknn-sim", "rk3588"), ctx)


def test_unknown_error_lines_warn_or_fail_by_policy(demo: Path) -> None:
    line = "E build: a message nobody has catalogued\n"
    warned = compilable_with_log(demo, "warn", line)
    assert warned.status == Status.PASS and "unknown-error" in warned.summary
    assert "E build: a message nobody has catalogued [unrecognised]" in warned.details
    failed = compilable_with_log(demo, "fail", line)
    assert failed.status == Status.FAIL and "unrecognised error lines" in failed.summary
    assert compilable_with_log(demo, "fail", "E RKNN: [10:00:00.1] Unkown op target: 0\n").status == (
        Status.PASS
    )


def test_unknown_error_policy_is_pinned_in_the_lock(demo: Path) -> None:
    intent = demo / "lockfiles/demo/baseline.toml"
    intent.write_text(
        intent.read_text().replace(
            'toolkit = { version = "2.5.0", timeout = 300 }',
            'toolkit = { version = "2.5.0", timeout = 300, unknown_errors = "fail" }',
        )
    )
    from baseline.locker import lock_project

    lock_project(Project.locate(demo / LOCK))
    compilable = results(demo, "detector")[("compilable", "rknn-sim", "rk3588")]
    # "E RKNN: Unkown op target: 0" is a known benign line, so the policy does not trip on it
    assert compilable.status == Status.PASS
    detector = load_lock(demo / LOCK).model("detector")
    assert detector is not None and detector.toolkit.unknown_errors == "fail"
