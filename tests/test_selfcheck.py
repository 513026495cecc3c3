"""`baseline lock` judges its own baseline: consistency and task run on the runs just measured
(nothing is run again), failures name the intent key and the value that would pass, and
calibration proposes values with headroom. A simulator run is stood in for by onnxruntime's
outputs with a fault, so no toolkit is needed."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from baseline.errors import InputError
from baseline.files.tensors import TensorSet
from baseline.gates.consistency import ceil_significant
from baseline.locker import PendingFiles, build_lock, write_checked
from baseline.locker.selfcheck import calibrate, calibrated_intent, proposed_intent, self_check
from baseline.models.calibration import TaskThresholdProposal, ToleranceProposal
from baseline.models.intent import TargetSpec
from baseline.models.lock import Lock, ReferencePin
from baseline.models.task_golden import DetectionGolden, TaskTable
from baseline.models.tolerances import ConsistencyTolerance
from baseline.project.layout import Project
from baseline.tasks.parts import stats_with_parts
from tests.gates.test_part_gates import yolo_project
from tests.tasks.test_real_models import TEXT


def arrays(data: bytes) -> TensorSet:
    with np.load(io.BytesIO(data)) as loaded:
        return {name: loaded[name] for name in loaded.files}


def with_simulator(project: Project, lock: Lock, pending: PendingFiles, outputs: TensorSet) -> Lock:
    """The lock as if `rknn-sim` on rk3588 had produced `outputs`."""
    model = lock.models[0]
    folder = project.root / "tensors" / model.name
    pin = pending.pin_arrays(project, folder, "outputs.rknn-sim.rk3588", outputs)
    reference = ReferencePin(
        backend="rknn-sim", target="rk3588", tensors=pin, outputs=stats_with_parts(model.parts, outputs)
    )
    simulated = model.model_copy(
        update={
            "backends": ["onnxruntime", "rknn-sim"],
            "targets": [TargetSpec(name="rk3588", platform="rk3588")],
            "references": [*model.references, reference],
        }
    )
    return lock.model_copy(update={"models": [simulated]})


def class_bias(golden: TensorSet, shift: float) -> TensorSet:
    """+`shift` on the logit of class 9 'Text' (the scores are sigmoids)."""
    scores = np.clip(golden["output0"][:, :, 4 + TEXT], 1e-7, 1 - 1e-7)
    faulty = golden["output0"].copy()
    faulty[:, :, 4 + TEXT] = 1 / (1 + np.exp(-(np.log(scores / (1 - scores)) + shift)))
    return {"output0": faulty}


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Project, Lock, PendingFiles, TensorSet]:
    project = yolo_project(tmp_path_factory.mktemp("selfcheck"))
    lock, pending = build_lock(project)
    golden_pin = lock.models[0].references[0].tensors
    golden = next(
        arrays(data) for path, data in pending.files.items() if path.name == Path(golden_pin.path).name
    )
    return project, lock, pending, golden


def test_a_baseline_that_fails_its_own_consistency_gets_the_values_that_would_pass(
    measured: tuple[Project, Lock, PendingFiles, TensorSet],
) -> None:
    project, lock, pending, golden = measured
    pending = PendingFiles(dict(pending.files))
    simulated = with_simulator(project, lock, pending, class_bias(golden, 1.0))
    checked = self_check(project, simulated, pending.files)
    assert [(r.gate, r.backend) for r in checked.failed] == [("consistency", "rknn-sim")]
    lines = [proposal.line() for proposal in checked.proposals]
    assert lines[0].startswith(
        'set [models.tolerances.outputs."output0:scores".consistency] min_cosine = 0.950067 for model layout'
    ), lines
    scores = '[models.tolerances.outputs."output0:scores".consistency]'
    assert f"set {scores} max_mismatch_ratio = 0.0093 for model layout (measured 0.00923084" in lines[1]
    assert all('"output0"' not in line for line in lines)  # the whole tensor passes

    # the proposed values do pass: put them where the intent would
    model = simulated.models[0]
    tolerances = dict(model.tolerances)
    current = tolerances["output0:scores"]
    loosened = current.consistency.model_copy(
        update={
            p.field: p.value
            for p in checked.proposals
            if isinstance(p, ToleranceProposal) and p.key == "output0:scores"
        }
    )
    tolerances["output0:scores"] = current.model_copy(update={"consistency": loosened})
    relaxed = simulated.model_copy(update={"models": [model.model_copy(update={"tolerances": tolerances})]})
    assert not self_check(project, relaxed, pending.files).failed


def test_strict_lock_refuses_and_writes_nothing(
    measured: tuple[Project, Lock, PendingFiles, TensorSet],
) -> None:
    project, lock, pending, golden = measured
    pending = PendingFiles(dict(pending.files))
    simulated = with_simulator(project, lock, pending, class_bias(golden, 1.0))
    with pytest.raises(InputError, match=r"not written, the new baseline fails its own gates; model layout"):
        write_checked(project, simulated, pending, strict=True)
    assert not project.lock_path.exists()


def test_an_unchanged_baseline_passes_its_own_gates(
    measured: tuple[Project, Lock, PendingFiles, TensorSet],
) -> None:
    project, lock, pending, golden = measured
    pending = PendingFiles(dict(pending.files))
    rounded = {"output0": golden["output0"].astype(np.float16).astype(np.float32)}
    checked = self_check(project, with_simulator(project, lock, pending, rounded), pending.files)
    assert [r.gate for r in checked.results] == ["consistency", "consistency"]  # no task declared
    assert not checked.failed and not checked.proposals


def test_calibration_proposes_headroom_over_the_worst_run(
    measured: tuple[Project, Lock, PendingFiles, TensorSet],
) -> None:
    project, lock, pending, golden = measured
    pending = PendingFiles(dict(pending.files))
    runs = []
    for shift in (0.2, 0.5):  # two "reconversions" that disagree by different amounts
        simulated = with_simulator(project, lock, pending, class_bias(golden, shift))
        runs.append(self_check(project, simulated, pending.files).results)
    calibration = calibrate(simulated, runs, {"layout": 2}, margin=1.5)
    scores = next(
        e for e in calibration.entries if e.key == "output0:scores" and e.where == "rknn-sim/rk3588"
    )
    assert scores.cosine is not None and scores.cosine < 0.99  # the worse run (shift 0.5) decides
    assert scores.proposed_min_cosine == pytest.approx(1 - (1 - scores.cosine) * 1.5, abs=1e-6)
    assert scores.proposed_max_mismatch_ratio == ceil_significant(scores.mismatch_ratio * 1.5, 2)
    text = proposed_intent(calibration)
    assert '[models.tolerances.outputs."output0:scores".consistency]\nmin_cosine = ' in text
    assert "# model layout: worst of 2 run(s) × 2 sample(s), ×1.5 headroom" in text
    assert ConsistencyTolerance().min_cosine > scores.proposed_min_cosine


def test_rounding_up_to_significant_digits() -> None:
    assert ceil_significant(0.01453, 2) == 0.015 and ceil_significant(0.0, 2) == 0.0
    assert ceil_significant(0.001, 2) == 0.001


DETECTION_TASK = """
[[models.tasks]]
kind = "detection"
output = "output0"
head = "yolov8"
"""


def moved_boxes(golden: TensorSet, fraction: float) -> TensorSet:
    """Box centres moved right by `fraction` of the box width: same objects, other places."""
    faulty = golden["output0"].copy()
    faulty[:, :, 0] += fraction * faulty[:, :, 2]
    return {"output0": faulty}


@pytest.fixture(scope="module")
def with_task(tmp_path_factory: pytest.TempPathFactory) -> tuple[Project, Lock, PendingFiles, TensorSet]:
    project = yolo_project(tmp_path_factory.mktemp("selfcheck-task"), extra=DETECTION_TASK)
    lock, pending = build_lock(project)
    golden_pin = lock.models[0].references[0].tensors
    golden = next(
        arrays(data) for path, data in pending.files.items() if path.name == Path(golden_pin.path).name
    )
    return project, lock, pending, golden


def with_threshold(lock: Lock, field: str, value: float, table: TaskTable = "task") -> Lock:
    """The lock with `field` set in the task's own thresholds or in its `table` override."""
    model = lock.models[0]
    task = model.tasks[0]
    if table == "task":
        task = task.model_copy(update={field: value})
    else:
        held = getattr(task, table) or DetectionGolden()
        task = task.model_copy(update={table: held.model_copy(update={field: value})})
    return lock.model_copy(update={"models": [model.model_copy(update={"tasks": [task]})]})


def test_a_baseline_that_fails_its_task_gets_the_threshold_that_would_pass_and_it_does(
    with_task: tuple[Project, Lock, PendingFiles, TensorSet],
) -> None:
    project, lock, pending, golden = with_task
    pending = PendingFiles(dict(pending.files))
    simulated = with_simulator(project, lock, pending, moved_boxes(golden, 0.1))
    checked = self_check(project, simulated, pending.files)
    assert ("task", "rknn-sim") in [(r.gate, r.backend) for r in checked.failed]
    (proposal,) = [p for p in checked.proposals if p.field == "min_mean_iou"]
    # measured against onnxruntime: the value goes to the override, never to the task's own
    assert proposal.line().startswith(
        f"set min_mean_iou = {proposal.value:g} in [models.tasks.golden] of [[models.tasks]] #0 "
        "(detection on 'output0') for model layout"
    )
    assert proposal.value <= proposal.measured < proposal.current == 0.85
    loosened = with_threshold(simulated, "min_mean_iou", proposal.value, "golden")
    rechecked = self_check(project, loosened, pending.files)
    assert not [r for r in rechecked.failed if r.gate == "task"], [r.summary for r in rechecked.failed]
    assert loosened.models[0].tasks[0].min_mean_iou == 0.85  # type: ignore[union-attr]


def test_calibration_proposes_task_thresholds_only_where_the_measurement_needs_them(
    with_task: tuple[Project, Lock, PendingFiles, TensorSet],
) -> None:
    project, lock, pending, golden = with_task
    pending = PendingFiles(dict(pending.files))
    runs = []
    for fraction in (0.02, 0.1):  # two "reconversions"; the second moves boxes past min_mean_iou
        simulated = with_simulator(project, lock, pending, moved_boxes(golden, fraction))
        runs.append(self_check(project, simulated, pending.files).results)
    calibration = calibrate(simulated, runs, {"layout": 2}, margin=1.5)
    by_field = {e.field: e for e in calibration.tasks}  # the worst over runs, backends, references
    iou = by_field["min_mean_iou"]
    assert iou.measured < iou.current == 0.85 and iou.where == "rknn-sim/rk3588 against onnxruntime today"
    assert iou.table == "golden"  # an fp16 build's distance from onnxruntime: its override only
    assert (
        iou.proposed == pytest.approx(1 - (1 - iou.measured) * 1.5, abs=1e-4) and iou.proposed < iou.measured
    )
    recall = by_field["min_recall"]
    assert recall.measured == 1.0 and recall.proposed == recall.current == 0.9  # never tightened
    text = proposed_intent(calibration)
    assert "# model layout: in [models.tasks.golden] of [[models.tasks]] #0 (detection on 'output0')" in text
    assert f"\n[models.tasks.golden]\nmin_mean_iou = {iou.proposed:g}\n" in text and "min_recall" not in text


def test_calibration_refuses_to_propose_what_a_broken_build_measures(
    with_task: tuple[Project, Lock, PendingFiles, TensorSet],
) -> None:
    """YOLOv8n's w8a8 build on the simulator: every class score quantized to 0 beside pixel-sized
    boxes (measured in the battery) — not a spread that a tolerance should absorb."""
    project, lock, pending, golden = with_task
    pending = PendingFiles(dict(pending.files))
    zeroed = golden["output0"].copy()
    zeroed[:, :, 4:] = 0.0
    simulated = with_simulator(project, lock, pending, {"output0": zeroed})
    checked = self_check(project, simulated, pending.files)
    calibration = calibrate(simulated, [checked.results], {"layout": 2}, margin=1.5)
    scores = next(
        e for e in calibration.entries if e.key == "output0:scores" and e.where == "rknn-sim/rk3588"
    )
    assert scores.refused is not None and scores.proposed_min_cosine == 0.9
    recall = next(e for e in calibration.tasks if e.field == "min_recall" and e.table == "golden")
    assert recall.measured == 0.0 and recall.proposed == recall.current and recall.refused is not None
    refusals = [p.line() for p in checked.proposals if isinstance(p, TaskThresholdProposal) and p.refused]
    assert refusals and refusals[0].startswith(
        "no value proposed for min_recall in [models.tasks.golden] of [[models.tasks]] #0"
    )
    text = proposed_intent(calibration)
    assert (
        "# model layout: [models.tasks.golden] of [[models.tasks]] #0 (detection on 'output0') min_recall "
        "not calibrated: measured min_recall 0 is a broken behaviour, not a spread (floor 0.5)" in text
    )


def test_calibrated_intent_writes_each_proposal_where_verify_reads_it_and_no_refused_one(
    with_task: tuple[Project, Lock, PendingFiles, TensorSet],
) -> None:
    project, lock, pending, golden = with_task
    pending = PendingFiles(dict(pending.files))
    zeroed = golden["output0"].copy()
    zeroed[:, :, 4:] = 0.0  # a broken build: nothing to calibrate for
    runs = [
        self_check(project, with_simulator(project, lock, pending, outputs), pending.files).results
        for outputs in (moved_boxes(golden, 0.1), {"output0": zeroed})
    ]
    calibration = calibrate(with_simulator(project, lock, pending, golden), runs, {"layout": 2}, margin=1.5)
    intent = {"models": [{"name": "layout", "tasks": [{"kind": "detection", "output": "output0"}]}]}
    calibrated = calibrated_intent(intent, calibration)
    assert intent == {"models": [{"name": "layout", "tasks": [{"kind": "detection", "output": "output0"}]}]}
    task = calibrated["models"][0]["tasks"][0]
    iou = next(e for e in calibration.tasks if e.field == "min_mean_iou" and e.table == "golden")
    assert task["golden"] == {"min_mean_iou": iou.proposed} and iou.proposed < 0.85
    assert (
        "min_mean_iou" not in task and "min_recall" not in task
    )  # recall 0 was refused, the intent's 0.9 stays
    boxes = calibrated["models"][0]["tolerances"]["outputs"]["output0:boxes"]["consistency"]
    entry = next(e for e in calibration.entries if e.key == "output0:boxes" and e.where == "rknn-sim/rk3588")
    assert boxes == {
        "min_cosine": entry.proposed_min_cosine,
        "max_mismatch_ratio": entry.proposed_max_mismatch_ratio,
    }
    scores = calibrated["models"][0]["tolerances"]["outputs"]["output0:scores"]["consistency"]
    assert scores["min_cosine"] == 0.9  # the floor, not the broken build's cosine
