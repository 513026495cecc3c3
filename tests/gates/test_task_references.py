"""The task gate's two references keep their own thresholds: the task's own judge a build against
its locked outputs (what changed since sign-off), `[models.tasks.golden]` / `golden_quantized`
against onnxruntime. A real YOLOv8n (PyPI wheel) on real photographs; the simulator's outputs are
onnxruntime's with boxes moved, so no toolkit is needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from baseline.errors import BaselineError, ConfigError
from baseline.files.tensors import TensorSet
from baseline.gates.task import TaskMetrics
from baseline.locker import PendingFiles, lock_project
from baseline.locker.selfcheck import against_first, calibrate
from baseline.models.intent import QuantizationSpec, TargetSpec
from baseline.models.lock import Lock
from baseline.models.results import GateResult, Status
from baseline.models.task_golden import DetectionGolden, GoldenTable
from baseline.project.layout import Project
from baseline.verification.verify import VerifyOptions, verify_project
from tests.gates.test_task_gate import direction_inputs, project
from tests.tasks.conftest import PPOCR_CLS, pypi_onnx
from tests.test_selfcheck import moved_boxes, with_simulator, with_task  # noqa: F401  (a fixture)

MOVED = 0.1
"""Box centres moved by a tenth of the box width: mean IoU of matched boxes ~0.82 < 0.85."""


def simulated(
    project: Project, lock: Lock, pending: PendingFiles, outputs: TensorSet, quantized: bool
) -> tuple[Lock, dict[Path, bytes]]:
    """The lock as if `rknn-sim` on rk3588 (fp16, or w8a8) had produced `outputs`, and its files."""
    files = PendingFiles(dict(pending.files))
    lock = with_simulator(project, lock, files, outputs)
    if quantized:
        target = TargetSpec(name="rk3588", platform="rk3588", quantization=QuantizationSpec())
        model = lock.models[0].model_copy(update={"targets": [target]})
        lock = lock.model_copy(update={"models": [model]})
    return lock, files.files


def with_golden(lock: Lock, table: GoldenTable, min_mean_iou: float) -> Lock:
    model = lock.models[0]
    task = model.tasks[0].model_copy(update={table: DetectionGolden(min_mean_iou=min_mean_iou)})
    return lock.model_copy(update={"models": [model.model_copy(update={"tasks": [task]})]})


def judged(
    measured: tuple[Project, Lock, PendingFiles, TensorSet],
    locked: TensorSet,
    today: TensorSet,
    quantized: bool = False,
    golden: tuple[GoldenTable, float] | None = None,
) -> GateResult:
    """The simulator's task result: `today`'s run against `locked` outputs and onnxruntime's."""
    project, lock, pending, _ = measured
    first, first_files = simulated(project, lock, pending, locked, quantized)
    later = simulated(project, lock, pending, today, quantized)
    if golden is not None:
        first = with_golden(first, *golden)
    (result,) = [r for r in against_first(project, (first, first_files), later) if r.backend == "rknn-sim"]
    return result


def verdicts(result: GateResult) -> dict[str, bool]:
    assert isinstance(result.metrics, TaskMetrics)
    return {check.against: check.outcome.passed for check in result.metrics.checks}


def test_a_loosened_golden_override_does_not_loosen_the_check_against_the_locked_outputs(
    with_task: tuple[Project, Lock, PendingFiles, TensorSet],  # noqa: F811
) -> None:
    golden = with_task[3]
    # signed off as onnxruntime's; today's build moved the boxes: a regression since sign-off
    result = judged(with_task, golden, moved_boxes(golden, MOVED), golden=("golden", 0.5))
    assert result.status == Status.FAIL
    assert verdicts(result) == {"locked rknn-sim/rk3588": False, "onnxruntime today": True}
    assert result.summary.startswith("1 task comparison(s) failed; first, against locked rknn-sim/rk3588")
    assert "mean IoU" in result.summary and "0.85" in result.summary
    assert result.hint is not None and "the task's own in [[models.tasks]]" in result.hint
    # without the override, the same distance from onnxruntime fails there too, naming its table
    strict = judged(with_task, golden, moved_boxes(golden, MOVED))
    assert verdicts(strict) == {"locked rknn-sim/rk3588": False, "onnxruntime today": False}


def test_the_golden_override_judges_the_distance_from_onnxruntime_and_not_a_reconversion(
    with_task: tuple[Project, Lock, PendingFiles, TensorSet],  # noqa: F811
) -> None:
    golden = with_task[3]
    moved = moved_boxes(golden, MOVED)
    # signed off with the moved boxes and unchanged since: only onnxruntime's comparison fails ...
    result = judged(with_task, moved, moved)
    assert verdicts(result) == {"locked rknn-sim/rk3588": True, "onnxruntime today": False}
    assert result.hint is not None and "[models.tasks.golden]" in result.hint
    # ... and the override absorbs it
    assert judged(with_task, moved, moved, golden=("golden", 0.8)).status == Status.PASS


@pytest.mark.parametrize(
    ("quantized", "table", "passes"),
    [
        (True, "golden_quantized", True),
        (True, "golden", False),  # an fp16 override does not loosen a w8a8 build
        (False, "golden_quantized", False),  # nor the other way round
        (False, "golden", True),
    ],
)
def test_the_quantized_override_applies_to_quantized_targets_only(
    with_task: tuple[Project, Lock, PendingFiles, TensorSet],  # noqa: F811
    quantized: bool,
    table: GoldenTable,
    passes: bool,
) -> None:
    moved = moved_boxes(with_task[3], MOVED)
    result = judged(with_task, moved, moved, quantized=quantized, golden=(table, 0.8))
    assert verdicts(result)["onnxruntime today"] is passes
    if not passes:
        wanted = "golden_quantized" if quantized else "golden"
        assert result.hint is not None and f"[models.tasks.{wanted}]" in result.hint


def test_calibration_loosens_the_task_own_thresholds_only_for_a_reconversion_spread(
    with_task: tuple[Project, Lock, PendingFiles, TensorSet],  # noqa: F811
) -> None:
    project, lock, pending, golden = with_task
    # two measurements: the first locked as onnxruntime's outputs, the second moved (a
    # reconversion that moved boxes), each also judged on its own against onnxruntime
    first = simulated(project, lock, pending, golden, quantized=True)
    later = simulated(project, lock, pending, moved_boxes(golden, MOVED), quantized=True)
    spread = against_first(project, first, later)
    calibration = calibrate(first[0], [], {"layout": 2}, margin=1.0, spread=[spread])
    iou = {e.table: e for e in calibration.tasks if e.field == "min_mean_iou"}
    assert iou["task"].where == "rknn-sim/rk3588 against locked rknn-sim/rk3588"
    assert iou["task"].measured < iou["task"].proposed + 1e-4 and iou["task"].proposed < 0.85
    assert iou["golden_quantized"].where == "rknn-sim/rk3588 against onnxruntime today"
    assert "golden" not in iou  # a w8a8 build's spread lands in its own table


def test_a_lock_only_edit_of_a_golden_override_is_refused(tmp_path: Path) -> None:
    """A pull request cannot loosen the comparison with onnxruntime by editing the lock alone."""
    task = (
        'kind = "classification"\noutput = "save_infer_model/scale_0.tmp_1"\ntop_k = 1\n'
        "[models.tasks.golden_quantized]\nmin_top1_agreement = 0.75"
    )
    classifier = project(tmp_path, "direction", pypi_onnx(*PPOCR_CLS), direction_inputs(), task)
    lock_project(classifier)
    text = classifier.lock_path.read_text()
    assert "[models.tasks.golden_quantized]\nmin_top1_agreement = 0.75" in text
    classifier.lock_path.write_text(text.replace("min_top1_agreement = 0.75", "min_top1_agreement = 0.0"))
    with pytest.raises(ConfigError, match=r"models\.direction\.tasks differs from models\.direction"):
        verify_project(classifier, options=VerifyOptions(use_cache=False))


def test_a_golden_override_of_another_kind_of_threshold_is_refused(tmp_path: Path) -> None:
    task = (
        'kind = "classification"\noutput = "save_infer_model/scale_0.tmp_1"\n'
        "[models.tasks.golden]\nmax_cer = 0.5"
    )
    classifier = project(tmp_path, "direction", pypi_onnx(*PPOCR_CLS), direction_inputs(), task)
    with pytest.raises(BaselineError, match=r"golden.*max_cer"):
        lock_project(classifier)
