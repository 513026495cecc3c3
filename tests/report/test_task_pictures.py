"""Failed task comparisons in the HTML report and sign-off: a real detector (YOLOv8n DocLayNet from
a PyPI wheel, onnxruntime) on real photographs, a score bias injected on one class; the pages are
parsed for the photograph and the golden and candidate boxes drawn on it."""

from __future__ import annotations

import base64
import shutil
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from baseline.files.pictures import fixture_pictures
from baseline.gates.task import TaskCheck, TaskMetrics
from baseline.locker import lock_project
from baseline.models.results import GateResult, Report, Status
from baseline.models.task import ClassificationTask, CtcTask, TaskOutcome
from baseline.project.layout import Project
from baseline.project.lockfile import load_lock
from baseline.report.html import render_html
from baseline.signoff import build_signoff, render_signoff_html
from baseline.tasks.compare import compare_task
from baseline.verification.verify import VerifyOptions, verify_project
from tests.gates.test_task_gate import with_score_bias
from tests.gates.test_team_postprocess import team_project
from tests.tasks.conftest import IMAGES, YOLO_DOCLAYNET, pypi_onnx
from tests.tasks.test_real_models import DOCLAYNET_CLASSES, TEXT

PHOTOS = ["product_sheet.jpg", "receipt.jpg"]
INTENT = """
[defaults]
backends = ["onnxruntime"]

[[models]]
name = "layout"
onnx = "models/layout.onnx"
fixtures = {{ images = {{ path = "images", resize = "letterbox" }} }}

[models.conversion.config]
mean_values = [[0, 0, 0]]
std_values = [[255, 255, 255]]

[[models.tasks]]
kind = "detection"
output = "output0"
head = "yolov8"
class_names = [{names}]
"""


class Drawing(HTMLParser):
    """The detection pictures of a page: per `<svg class="... detections">`, its image and boxes."""

    def __init__(self) -> None:
        super().__init__()
        self.pictures: list[dict[str, list[dict[str, str]]]] = []
        self.texts: list[str] = []
        self._in_text = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {key: value or "" for key, value in attrs}
        if tag == "svg" and "detections" in found.get("class", ""):
            self.pictures.append({"image": [], "golden": [], "candidate": []})
        elif self.pictures and tag == "image":
            self.pictures[-1]["image"].append(found)
        elif self.pictures and tag == "rect" and found.get("class") in ("golden", "candidate"):
            self.pictures[-1][found["class"]].append(found)
        self._in_text = tag == "text"

    def handle_data(self, data: str) -> None:
        if self._in_text:
            self.texts.append(data)
            self._in_text = False


@pytest.fixture(scope="module")
def failed_detector(tmp_path_factory: pytest.TempPathFactory) -> tuple[Project, Report]:
    root = tmp_path_factory.mktemp("pictures")
    (root / "models").mkdir()
    (root / "images").mkdir()
    shutil.copyfile(pypi_onnx(*YOLO_DOCLAYNET), root / "models" / "layout.onnx")
    for photo in PHOTOS:
        shutil.copyfile(IMAGES / photo, root / "images" / photo)
    names = ", ".join(f'"{name}"' for name in DOCLAYNET_CLASSES)
    (root / "baseline.toml").write_text(INTENT.format(names=names))
    project = Project.locate(root / "baseline.lock")
    lock_project(project)
    with_score_bias(root / "models" / "layout.onnx", root / "models" / "layout.onnx", 4 + TEXT, 0.2)
    return project, verify_project(project, options=VerifyOptions(use_cache=False))


def drawing(page: str) -> Drawing:
    parser = Drawing()
    parser.feed(page)
    return parser


def test_the_report_draws_golden_and_candidate_boxes_on_the_fixture_photograph(
    failed_detector: tuple[Project, Report],
) -> None:
    project, report = failed_detector
    task = next(result for result in report.results if result.gate == "task")
    assert task.status == Status.FAIL
    lock = load_lock(project.lock_path)
    parsed = drawing(render_html(report, lock, fixture_pictures(project, lock)))

    assert len(parsed.pictures) == 2  # the bias adds Text boxes on both photographs
    first = parsed.pictures[0]
    assert len(first["image"]) == 1
    href = first["image"][0]["href"]
    assert href.startswith("data:image/jpeg;base64,")
    assert base64.b64decode(href.split(",", 1)[1]) == (IMAGES / PHOTOS[0]).read_bytes()
    assert first["image"][0]["preserveaspectratio"] == "xMinYMin meet"  # letterboxed top-left
    # the score bias turns more regions into Text: the candidate has more Text boxes than the golden
    golden_text = [box for box in first["golden"] if box["data-class"] == str(TEXT)]
    candidate_text = [box for box in first["candidate"] if box["data-class"] == str(TEXT)]
    assert len(candidate_text) > len(golden_text)
    assert all(0 <= float(box["x"]) <= 1024 and float(box["width"]) > 0 for box in first["candidate"])
    assert any(text.startswith("class 9 'Text' ") for text in parsed.texts)


def test_the_signoff_draws_them_too_and_without_photographs_on_a_blank_canvas(
    failed_detector: tuple[Project, Report],
) -> None:
    project, report = failed_detector
    lock = load_lock(project.lock_path)
    sheet = build_signoff(lock, report, None)
    with_photos = drawing(render_signoff_html(sheet, report, lock, fixture_pictures(project, lock)))
    assert len(with_photos.pictures) == 2 and with_photos.pictures[1]["image"]
    assert with_photos.pictures[1]["candidate"]

    blank = render_signoff_html(sheet, report, lock)
    parsed = drawing(blank)
    assert len(parsed.pictures) == 2 and not parsed.pictures[0]["image"]
    assert "data:image" not in blank and "<h2>Task comparisons that failed</h2>" in blank


def task_report(*outcomes: TaskOutcome) -> Report:
    metrics = TaskMetrics(checks=[TaskCheck(against="locked onnxruntime", outcome=o) for o in outcomes])
    result = GateResult(
        model="m", gate="task", status=Status.FAIL, summary="failed", backend="onnxruntime", metrics=metrics
    )
    return Report(lock="baseline.lock", results=[result])


def cells(page: str) -> list[list[str]]:
    """The rows of the side-by-side tables, as text."""

    class Rows(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.rows: list[list[str]] = []
            self.inside = False

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "table" and ("class", "sides") in attrs:
                self.inside = True
            elif self.inside and tag == "tr":
                self.rows.append([])

        def handle_endtag(self, tag: str) -> None:
            self.inside = self.inside and tag != "table"

        def handle_data(self, data: str) -> None:
            if self.inside and self.rows and data.strip():
                self.rows[-1].append(data)

    parser = Rows()
    parser.feed(page)
    return parser.rows


def test_changed_texts_and_classes_are_side_by_side() -> None:
    steps = np.full((2, 6, 4), 0.01, dtype=np.float32)
    for sample, classes in enumerate([[1, 0, 2, 2, 0, 3], [3, 3, 0, 1, 1, 0]]):
        steps[sample, np.arange(6), classes] = 0.97
    changed = steps.copy()
    changed[1, 3] = [0.01, 0.01, 0.97, 0.01]  # sample 1: a "b" appears before the "a"
    ctc = CtcTask(output="probs", alphabet=["a", "b", "c"])
    logits = np.array([[0.1, 2.0, 0.3], [1.5, 0.2, 0.1]], dtype=np.float32)
    classifier = ClassificationTask(output="logits", top_k=1, class_names=["cat", "dog", "fox"])
    page = render_html(
        task_report(
            compare_task(ctc, {"probs": steps}, {"probs": changed}),
            compare_task(classifier, {"logits": logits}, {"logits": logits[:, ::-1].copy()}),
        )
    )
    rows = cells(page)
    assert ["sample 1", "ca", "cba", "0.500"] in rows  # c c _ a a _ → "ca"; c c _ b a _ → "cba"
    assert ["sample 0", "class 1 (p 2.000)", "class 1 (p 2.000)"] not in rows  # unchanged: not listed
    assert any(
        row[0] == "sample 1" and row[1].startswith("class 0") and row[2].startswith("class 2") for row in rows
    )


def test_only_image_fixtures_give_pictures(failed_detector: tuple[Project, Report], tmp_path: Path) -> None:
    project, _ = failed_detector
    lock = load_lock(project.lock_path)
    pictures = fixture_pictures(project, lock)
    photo = pictures("layout", 1)
    assert photo is not None and (photo.width, photo.height, photo.letterbox) == (1024, 1024, True)
    assert photo.data == (IMAGES / PHOTOS[1]).read_bytes() and photo.mime == "image/jpeg"
    assert pictures("layout", 2) is None and pictures("no such model", 0) is None

    # fixtures from an .npz: nothing to draw on
    tensors = team_project(tmp_path)
    lock_project(tensors)
    assert fixture_pictures(tensors, load_lock(tensors.lock_path))("direction", 0) is None
