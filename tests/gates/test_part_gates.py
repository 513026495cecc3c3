"""Per-part consistency and drift on a real YOLOv8n (ONNX shipped in a PyPI wheel) and real
photographs: a score-bias fault on one class hides in whole-tensor numbers (boxes in pixels
dominate them) and is named by the parts `boxes` / `scores` and the channel of that class."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from baseline.errors import ConfigError, InputError
from baseline.files.tensors import save_npz
from baseline.gates.consistency import ConsistencyMetrics
from baseline.gates.consistency import _hint as proposed_tolerances
from baseline.gates.drift import DriftMetrics
from baseline.locker import lock_project
from baseline.models.results import GateResult, Status
from baseline.models.task import OutputPart
from baseline.models.tolerances import ToleranceSpec
from baseline.project.intent import output_tolerances
from baseline.project.layout import Project
from baseline.project.lockfile import load_lock
from baseline.tasks.locking import check_tolerance_keys
from baseline.verification.verify import VerifyOptions, verify_project
from tests.conftest import REPO
from tests.tasks.conftest import YOLO_DOCLAYNET, letterbox, load_rgb, pypi_onnx
from tests.tasks.test_real_models import TEXT

PARTS = """
[[models.parts]]
output = "output0"
name = "boxes"
stop = 4

[[models.parts]]
output = "output0"
name = "scores"
start = 4
per_channel = true
{extra}
"""

INTENT = """
[defaults]
backends = ["onnxruntime"]

[[models]]
name = "layout"
onnx = "models/layout.onnx"
fixtures = {{ path = "fixtures/layout.npz" }}
"""


def yolo_project(tmp_path: Path, extra: str = "") -> Project:
    (tmp_path / "models").mkdir()
    (tmp_path / "fixtures").mkdir()
    shutil.copyfile(pypi_onnx(*YOLO_DOCLAYNET), tmp_path / "models" / "layout.onnx")
    images = [letterbox(load_rgb(name), 1024) for name in ("product_sheet.jpg", "receipt.jpg")]
    save_npz(tmp_path / "fixtures" / "layout.npz", {"images": np.stack(images)[:, None]})
    (tmp_path / "baseline.toml").write_text(INTENT.format() + PARTS.format(extra=extra))
    return Project.locate(tmp_path / "baseline.lock")


def with_class_bias(path: Path, class_id: int, shift: float) -> None:
    """Add `shift` to one class's logit bias in the three class convolutions of the head."""
    model = onnx.load(str(path))
    for init in model.graph.initializer:
        if init.name.startswith("model.22.cv3.") and init.name.endswith(".2.bias"):
            bias = numpy_helper.to_array(init).copy()
            bias[class_id] += shift
            init.CopyFrom(numpy_helper.from_array(bias, init.name))
    onnx.save(model, str(path))


def results(project: Project) -> dict[str, GateResult]:
    report = verify_project(project, options=VerifyOptions(use_cache=False))
    return {result.gate: result for result in report.results}


def test_a_class_score_bias_passes_whole_tensor_numbers_and_fails_per_part(tmp_path: Path) -> None:
    project = yolo_project(tmp_path)
    lock_project(project)
    reference = project.lock_path.read_text()
    assert '"output0:scores"' in reference and '"output0:scores[9]"' in reference
    unchanged = results(project)
    assert unchanged["consistency"].status == Status.PASS, unchanged["consistency"].details
    assert unchanged["consistency"].summary.startswith("1 outputs and 13 parts/channels agree")
    assert unchanged["drift"].status == Status.PASS
    assert unchanged["drift"].summary.startswith("1 outputs, 2 parts, 11 channels within tolerance")

    with_class_bias(tmp_path / "models" / "layout.onnx", TEXT, 1.0)  # the logit of class 9 'Text' +1
    faulty = results(project)
    consistency, drift = faulty["consistency"], faulty["drift"]
    assert isinstance(consistency.metrics, ConsistencyMetrics) and isinstance(drift.metrics, DriftMetrics)
    whole = consistency.metrics.outputs["output0"]
    # before: the whole tensor meets every limit (boxes in pixels dominate it)
    assert whole.cosine is not None and whole.cosine >= whole.min_cosine
    assert whole.mismatch_ratio <= 0.001
    assert drift.metrics.outputs["output0"].worst_ratio < 0.01
    assert drift.metrics.outputs["output0:boxes"].worst_ratio == 0.0
    # after: the scores part and its class-9 channel fail, named
    assert consistency.status == Status.FAIL and drift.status == Status.FAIL
    scores = consistency.metrics.outputs["output0:scores"]
    assert scores.cosine is not None and scores.cosine < 0.96
    assert consistency.details[0].startswith("part 'output0:scores': cosine 0.95")
    assert any(line.startswith("channel 'output0:scores[9]': ") for line in consistency.details)
    # judged against the part's resolution (0.002 of its range), the fault is still 200x too far
    assert drift.summary.startswith("5 statistics drifted; first: part 'output0:scores' max: baseline 0.369")
    assert drift.summary.endswith("atol includes 0.002 of the part's locked range 0.369)")
    assert drift.metrics.outputs["output0:scores[9]"].worst_ratio > 100
    assert all(not line.startswith("output 'output0'") for line in drift.details)


def test_a_part_tolerance_applies_to_that_part_only(tmp_path: Path) -> None:
    loose = (
        '\n[models.tolerances.outputs."output0:scores".consistency]\n'
        "min_cosine = 0.9\nmax_mismatch_ratio = 0.05\n"
    )
    project = yolo_project(tmp_path, loose)
    lock_project(project)
    with_class_bias(tmp_path / "models" / "layout.onnx", TEXT, 1.0)
    consistency = results(project)["consistency"]
    assert isinstance(consistency.metrics, ConsistencyMetrics)
    assert consistency.metrics.outputs["output0:scores"].min_cosine == 0.9
    assert consistency.metrics.outputs["output0:scores[9]"].max_mismatch_ratio == 0.05
    assert consistency.metrics.outputs["output0:boxes"].min_cosine == 0.9999
    assert consistency.status == Status.PASS, consistency.details


def test_part_tolerances_start_from_their_output() -> None:
    spec = ToleranceSpec.model_validate(
        {
            "drift": {"atol": 0.5},
            "outputs": {"y": {"drift": {"rtol": 0.2}}, "y:scores": {"consistency": {"atol": 0.1}}},
        }
    )
    resolved = output_tolerances(spec, ["y"], [OutputPart(output="y", name="scores", start=4)])
    assert resolved["y:scores"].drift.rtol == 0.2 and resolved["y:scores"].drift.atol == 0.5
    assert resolved["y:scores"].consistency.atol == 0.1 and resolved["y"].consistency.atol == 5e-3


def test_a_tolerance_key_naming_no_output_or_part_is_refused() -> None:
    parts = [OutputPart(output="output0", name="scores", start=4)]
    check_tolerance_keys(["output0", "output0:scores"], parts, ["output0"], "baseline.toml: models.det")
    with pytest.raises(InputError, match=r"models\.det\.tolerances\.outputs\.'output0:score': names no"):
        check_tolerance_keys(["output0:score"], parts, ["output0"], "baseline.toml: models.det")


def test_a_lock_only_edit_of_a_part_tolerance_is_refused(tmp_path: Path) -> None:
    """Part tolerances are rules: `verify` recomputes them from the intent."""
    project = yolo_project(tmp_path)
    lock_project(project)
    text = project.lock_path.read_text()
    table = '[models.tolerances."output0:scores".consistency]\nmin_cosine = 0.9999'
    assert table in text
    project.lock_path.write_text(text.replace(table, table.replace("0.9999", "0.5")))
    with pytest.raises(ConfigError, match=r"models\.layout\.tolerances differs from models\.layout"):
        verify_project(project, options=VerifyOptions(use_cache=False))


def test_a_consistency_failure_names_the_intent_keys_and_values_that_would_pass(tmp_path: Path) -> None:
    project = yolo_project(tmp_path)
    lock_project(project)
    with_class_bias(tmp_path / "models" / "layout.onnx", TEXT, 1.0)
    consistency = results(project)["consistency"]
    assert consistency.status == Status.FAIL and isinstance(consistency.metrics, ConsistencyMetrics)
    # against the locked golden, a changed model is accepted or reverted (issue 28); the values
    # that would pass are what a build's row, compared with onnxruntime today, proposes
    assert consistency.hint is not None and consistency.hint.startswith("the model changed since the lock")
    model = load_lock(project.lock_path).model("layout")
    assert model is not None
    hint = proposed_tolerances(model, consistency.metrics, False, "rknn-sim/rk3588")
    assert hint.startswith("if this accuracy is acceptable, set in the intent file: ")
    named = dict(
        re.findall(r'(\[models\.tolerances\.outputs\."[^"]+"\.consistency\] \w+) = ([0-9.e-]+)', hint)
    )
    # the channel's failure counts towards its part's key, which names the worst of them
    scores = consistency.metrics.outputs["output0:scores"]
    key = '[models.tolerances.outputs."output0:scores".consistency] min_cosine'
    assert scores.cosine is not None and float(named[key]) <= scores.cosine < scores.min_cosine
    channels = [a for name, a in consistency.metrics.outputs.items() if name.startswith("output0:scores")]
    assert float(named[key]) <= min(a.cosine for a in channels if a.cosine is not None)
    assert all('"output0:scores"' in name for name in named), named  # boxes and the whole tensor pass
    for name, value in named.items():
        limit = name.rsplit(" ", 1)[1]
        worst = [getattr(a, "cosine" if limit == "min_cosine" else "mismatch_ratio") for a in channels]
        if limit == "min_cosine":
            assert float(value) <= min(worst), name  # the proposed value would pass
        else:
            assert float(value) >= max(worst), name


def test_a_control_change_that_moves_no_detection_raises_no_alarm_per_channel(tmp_path: Path) -> None:
    """Every class logit +0.003 (scores move by at most 7.5e-4, near-zero tails by far less): the
    channels are judged against their own resolution, not flagged for moving their noise."""
    project = yolo_project(tmp_path)
    lock_project(project)
    for class_id in range(11):
        with_class_bias(tmp_path / "models" / "layout.onnx", class_id, 0.003)
    control = results(project)
    assert control["consistency"].status == Status.PASS, control["consistency"].details
    assert control["drift"].status == Status.PASS, control["drift"].details


def test_a_quantized_build_s_statistics_may_move_by_their_own_distance_from_onnxruntime() -> None:
    """Any change to the ONNX file is quantized afresh, which redraws a w8a8 build's error: the
    battery's control retrain moved a hybrid w8a8 YOLOv8n's class-7 max by 0.0018 (drift allowed
    0.0011) where quantization had put it 0.011 from onnxruntime's. Each statistic of a quantized
    build of a changed ONNX may also move by its locked distance from onnxruntime's; fp16 builds,
    and a quantized build of the unchanged file, get nothing more."""
    from baseline.gates.drift import _compare_outputs, quantization_slack

    model = load_lock(REPO / "lockfiles" / "demo" / "baseline.lock").model("classifier")
    assert model is not None
    golden, w8a8 = model.reference("onnxruntime", None), model.reference("rknn-sim", "rk3588-w8a8")
    fp16 = model.reference("rknn-sim", "rk3588")
    assert golden is not None and w8a8 is not None and fp16 is not None
    locked = next(s for s in w8a8.outputs if s.name == "logits")
    floating = next(s for s in golden.outputs if s.name == "logits")
    distance = abs(locked.max - floating.max)  # type: ignore[operator]
    assert distance > 1e-3  # the demo's w8a8 logits max sits 0.0017 from onnxruntime's
    assert quantization_slack(model, w8a8, locked, True)["max"] == pytest.approx(distance)
    assert (
        quantization_slack(model, fp16, locked, True)
        == {}
        == quantization_slack(model, golden, floating, True)
    )
    assert quantization_slack(model, w8a8, locked, False) == {}

    def moved(by: float, requantized: bool = True) -> list[str]:
        candidates = {s.name: s for s in w8a8.outputs}
        candidates["logits"] = locked.model_copy(update={"max": locked.max + by})  # type: ignore[operator]
        details, _ = _compare_outputs(model, w8a8, candidates, requantized=requantized)
        return details

    assert moved(0.8 * distance) == []  # within the build's own quantization error: no alarm
    [line] = moved(distance + 0.01)  # past it (the class bias moved the scores' max by 0.13): red
    assert "logits' max" in line and "the quantized build's distance from onnxruntime" in line
    # the ONNX file unchanged, its build moves only when the conversion or calibration does: no slack
    [line] = moved(0.8 * distance, requantized=False)
    assert "logits' max" in line and "distance from onnxruntime" not in line
