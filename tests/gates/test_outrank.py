"""Reality outranks prediction: a static "does not compile" never fails a model the real
toolkit built for the same target, and `baseline check` reports what verify observed."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from baseline.files.hashing import sha256_file
from baseline.gates.compilable import CompilableMetrics
from baseline.gates.outrank import reality_first
from baseline.gates.static import StaticMetrics
from baseline.models.lock import ModelLock
from baseline.models.results import GateResult, Status
from baseline.project.lockfile import load_lock
from baseline.verification.observations import CompileObservations, Observation, observation_key
from tests.conftest import REPO

DEMO_LOCK = REPO / "lockfiles" / "demo" / "baseline.lock"


def _model() -> ModelLock:
    model = load_lock(DEMO_LOCK).model("classifier")
    assert model is not None
    return model


def _prediction(status: Status = Status.FAIL, verdict: str = "fails") -> GateResult:
    metrics = StaticMetrics(
        findings=1, errors=1, nodes=9, rules=["layer-norm-constant"], seconds=0.01, verdict=verdict
    )
    return GateResult(
        model="classifier",
        gate="static",
        status=status,
        target="rk3588",
        summary="predicted not to compile: node 'ln' (LayerNormalization) ...",
        metrics=metrics,
        hint="cut the graph",
    )


def _compiled(stage: str, status: Status = Status.PASS) -> GateResult:
    metrics = CompilableMetrics(stage=stage, seconds={}, diagnostics={}, rules=[])
    return GateResult(
        model="classifier",
        gate="compilable",
        status=status,
        target="rk3588",
        backend="rknn-sim",
        summary="built fp16",
        metrics=metrics,
    )


def test_a_prediction_the_compiler_contradicts_passes_and_says_it_was_wrong(tmp_path: Path) -> None:
    observations = CompileObservations(tmp_path)
    static, compilable = reality_first([_model()], [_prediction(), _compiled("done")], observations)
    assert static.status == Status.PASS and static.hint is None
    assert static.summary.startswith("compiled for real, so the prediction was wrong")
    assert "layer-norm-constant" in static.summary and "LayerNormalization" in static.summary
    assert compilable.status == Status.PASS
    observations.save()
    model = _model()
    key = observation_key(model.onnx.sha256, model.toolkit.version, "rk3588", quantized=False)
    kept = CompileObservations(tmp_path).get(key)
    rules = ("layer-norm-constant",)
    expected = Observation(compiled=True, predicted="fails", rules=rules, model="classifier")
    assert kept == expected


def test_the_prediction_stands_where_the_compiler_failed_crashed_or_never_ran() -> None:
    failed = _compiled("build", Status.FAIL)
    crashed = _compiled("crash", Status.ERROR)
    for others in ([failed], [crashed], []):
        (static, *_) = reality_first([_model()], [_prediction(), *others])
        assert static.status == Status.FAIL and static.summary.startswith("predicted not to compile")


def test_a_prediction_confirming_a_declared_build_failure_is_expected_not_red() -> None:
    # measured on the unseen battery: a model with `expect_fail` on compilable (the toolkit
    # refuses its unread input) turned red once a new rule predicted that very failure
    declared = _compiled("load", Status.XFAIL)
    (static, compilable) = reality_first([_model()], [_prediction(), declared])
    assert static.status == Status.XFAIL and compilable.status == Status.XFAIL
    assert "the toolkit did not build it either" in static.summary
    assert "LayerNormalization" in static.summary  # the rule's own line stays
    # an undeclared failure, or an expect_fail on static the checker no longer meets, stays red
    (static, _) = reality_first([_model()], [_prediction(), _compiled("load", Status.FAIL)])
    assert static.status == Status.FAIL
    stale = _prediction(verdict="unknown").but(summary="passed, but the intent file expects it to fail (...)")
    (static, _) = reality_first([_model()], [stale, declared])
    assert static.status == Status.FAIL and static.summary.startswith("passed, but")


def test_a_build_failed_only_by_policy_still_outranks_the_prediction() -> None:
    # `unknown_errors = "fail"` fails a build that exported: the compiler still built it
    (static, _) = reality_first([_model()], [_prediction(), _compiled("done", Status.FAIL)])
    assert static.status == Status.PASS


def test_check_reports_what_verify_observed_and_exits_by_it(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    onnx = tmp_path / "nms_head.onnx"
    shutil.copy2(REPO / "fixtures" / "demo" / "nms_head.onnx", onnx)
    code, out, _ = cli(tmp_path, "check", "nms_head.onnx")
    assert code == 1 and "predicted NOT to compile" in out and "observed" not in out
    observations = CompileObservations(tmp_path / ".baseline-cache")
    key = observation_key(sha256_file(onnx), "2.5.0", "rk3588", quantized=False)
    observations.put(key, Observation(compiled=True, predicted="fails", rules=("nms",), model="head"))
    observations.save()
    code, out, _ = cli(tmp_path, "check", "nms_head.onnx")
    assert code == 0, out
    assert "observed: this file compiled for rk3588" in out and "the prediction is wrong" in out
    code, out, _ = cli(tmp_path, "check", "nms_head.onnx", "--target", "rk3566")
    assert code == 1 and "observed" not in out  # another platform was never observed
