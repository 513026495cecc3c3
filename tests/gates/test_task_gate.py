"""The task gate through `lock` and `verify`, on real models (ONNX shipped in PyPI wheels) and
real photographs: unchanged models pass, faults injected into the model are named by class,
sample and numbers. onnxruntime only (no toolkit): the simulator case is in the toolkit tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from baseline.errors import ConfigError, InputError
from baseline.files.tensors import save_npz
from baseline.gates.task import TaskMetrics
from baseline.locker import lock_project
from baseline.models.results import GateResult, Status
from baseline.project.layout import Project
from baseline.verification.verify import VerifyOptions, verify_project
from tests.tasks.conftest import PPOCR_CLS, YOLO_DOCLAYNET, letterbox, load_rgb, ocr_line, pypi_onnx
from tests.tasks.test_real_models import DOCLAYNET_CLASSES, TEXT, swapped_classifier_rows, text_crops

INTENT = """
[defaults]
backends = ["onnxruntime"]

[[models]]
name = "{name}"
onnx = "models/{name}.onnx"
fixtures = {{ path = "fixtures/{name}.npz" }}

[[models.tasks]]
{task}
"""


def project(tmp_path: Path, name: str, model: Path, inputs: dict[str, np.ndarray], task: str) -> Project:
    (tmp_path / "models").mkdir()
    (tmp_path / "fixtures").mkdir()
    shutil.copyfile(model, tmp_path / "models" / f"{name}.onnx")
    save_npz(tmp_path / "fixtures" / f"{name}.npz", inputs)
    (tmp_path / "baseline.toml").write_text(INTENT.format(name=name, task=task))
    return Project.locate(tmp_path / "baseline.lock")


def task_result(project: Project) -> GateResult:
    report = verify_project(project, options=VerifyOptions(use_cache=False))
    return next(result for result in report.results if result.gate == "task")


def direction_inputs() -> dict[str, np.ndarray]:
    upright = text_crops()[1:]
    lines = [ocr_line(crop, 48, 192) for crop in upright + [crop[::-1, ::-1].copy() for crop in upright]]
    return {"x": np.stack(lines)[:, None]}


def test_swapped_classifier_rows_fail_the_task_gate_naming_sample_and_class(tmp_path: Path) -> None:
    task = (
        'kind = "classification"\noutput = "save_infer_model/scale_0.tmp_1"\n'
        'top_k = 1\nclass_names = ["0°", "180°"]'
    )
    classifier = project(tmp_path, "direction", pypi_onnx(*PPOCR_CLS), direction_inputs(), task)
    lock_project(classifier)
    unchanged = task_result(classifier)
    assert unchanged.status == Status.PASS, unchanged.details
    assert unchanged.summary == "1 task(s) unchanged against locked onnxruntime"

    onnx_path = tmp_path / "models" / "direction.onnx"
    swapped_classifier_rows(onnx_path, onnx_path)
    faulty = task_result(classifier)
    assert faulty.status == Status.FAIL
    assert faulty.details[0].startswith(
        "against locked onnxruntime: sample 0: top-1 changed from class 0 '0°'"
    )
    assert isinstance(faulty.metrics, TaskMetrics) and faulty.metrics.headline().value == 1.0


def with_score_bias(source: Path, destination: Path, channel: int, shift: float) -> None:
    """The model with `shift` added to one class's scores in the graph (a changed bias)."""
    model = onnx.load(str(source))
    output = model.graph.output[0].name
    delta = np.zeros((1, model.graph.output[0].type.tensor_type.shape.dim[1].dim_value, 1), np.float32)
    delta[0, channel, 0] = shift
    model.graph.initializer.append(numpy_helper.from_array(delta, "score_bias"))
    for node in model.graph.node:
        node.output[:] = [f"{name}_raw" if name == output else name for name in node.output]
    model.graph.node.append(helper.make_node("Add", [f"{output}_raw", "score_bias"], [output]))
    onnx.save(model, str(destination))


def test_a_score_bias_on_one_detector_class_fails_the_task_gate(tmp_path: Path) -> None:
    images = [letterbox(load_rgb(name), 1024) for name in ("product_sheet.jpg", "receipt.jpg")]
    names = ", ".join(f'"{name}"' for name in DOCLAYNET_CLASSES)
    task = f'kind = "detection"\noutput = "output0"\nhead = "yolov8"\nclass_names = [{names}]'
    detector = project(
        tmp_path, "layout", pypi_onnx(*YOLO_DOCLAYNET), {"images": np.stack(images)[:, None]}, task
    )
    lock_project(detector)
    assert task_result(detector).status == Status.PASS

    onnx_path = tmp_path / "models" / "layout.onnx"
    with_score_bias(onnx_path, onnx_path, 4 + TEXT, 0.2)
    faulty = task_result(detector)
    assert faulty.status == Status.FAIL
    assert "extra detections of class 9 'Text'" in faulty.summary and "sample 0" in faulty.summary


def test_a_task_on_an_output_the_model_lacks_is_refused_at_lock(tmp_path: Path) -> None:
    task = 'kind = "classification"\noutput = "no_such_output"'
    classifier = project(tmp_path, "direction", pypi_onnx(*PPOCR_CLS), direction_inputs(), task)
    with pytest.raises(
        InputError, match=r"models.direction.tasks\[0\] \(classification\): the model has no output"
    ):
        lock_project(classifier)


def test_a_lock_only_edit_of_a_task_threshold_is_refused(tmp_path: Path) -> None:
    """A pull request cannot loosen the task gate by editing the generated lock alone."""
    task = 'kind = "classification"\noutput = "save_infer_model/scale_0.tmp_1"\ntop_k = 1'
    classifier = project(tmp_path, "direction", pypi_onnx(*PPOCR_CLS), direction_inputs(), task)
    lock_project(classifier)
    text = classifier.lock_path.read_text()
    assert "min_top1_agreement = 1.0" in text
    classifier.lock_path.write_text(text.replace("min_top1_agreement = 1.0", "min_top1_agreement = 0.0"))
    with pytest.raises(ConfigError, match=r"models\.direction\.tasks differs from models\.direction"):
        verify_project(classifier, options=VerifyOptions(use_cache=False))
