"""Each decoder and metric on small synthetic arrays whose answers are known by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import TypeAdapter, ValidationError

from baseline.errors import InputError
from baseline.models.task import (
    ClassificationTask,
    CtcTask,
    DetectionTask,
    OutputPart,
    SegmentationTask,
    TaskIntent,
    TaskSpec,
)
from baseline.tasks import compare_part, compare_task, part_statistics, split_parts
from baseline.tasks.classification import softmax, top_k
from baseline.tasks.ctc import character_error_rate, edit_distance, greedy_decode, render_text
from baseline.tasks.detection import (
    Detections,
    box_iou,
    decode_yolov5,
    decode_yolov8,
    decode_yolov10,
    greedy_match,
    nms,
)
from baseline.tasks.segmentation import class_iou

# ---------------------------------------------------------------- boxes


def test_box_iou_known_values() -> None:
    first = np.array([[0, 0, 10, 10], [0, 0, 0, 0]], dtype=float)
    second = np.array([[0, 0, 10, 10], [5, 0, 15, 10], [20, 20, 30, 30], [np.nan, 0, 1, 1]], dtype=float)
    np.testing.assert_allclose(box_iou(first, second), [[1.0, 50 / 150, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])


def detections(boxes: list[list[float]], scores: list[float], classes: list[int]) -> Detections:
    return Detections(np.array(boxes, dtype=float), np.array(scores, dtype=float), np.array(classes))


def test_nms_suppresses_overlaps_within_a_class_only() -> None:
    found = detections(
        [[0, 0, 10, 10], [1, 0, 11, 10], [0, 0, 10, 10], [50, 50, 60, 60]], [0.9, 0.8, 0.7, 0.6], [0, 0, 1, 0]
    )
    assert nms(found, 0.5).tolist() == [0, 2, 3]
    assert nms(detections([], [], []).take(np.zeros(0, dtype=int)), 0.5).tolist() == []


def test_greedy_match_takes_the_best_iou_first_and_respects_classes() -> None:
    golden = detections([[0, 0, 10, 10], [0, 0, 12, 10]], [0.9, 0.9], [0, 0])
    candidate = detections([[0, 0, 12, 10], [100, 0, 110, 10], [0, 0, 10, 10]], [0.9, 0.9, 0.9], [0, 0, 1])
    # golden 1 and candidate 0 are identical; golden 0 then has no free class-0 partner left
    assert greedy_match(golden, candidate, 0.5, same_class=True) == [(1, 0, 1.0)]
    assert [(g, c) for g, c, _ in greedy_match(golden, candidate, 0.5, same_class=False)] == [(0, 2), (1, 0)]


# ---------------------------------------------------------------- decoders


def yolov8_image(boxes: list[list[float]], scores: list[list[float]], anchors: int = 16) -> np.ndarray:
    """`[4 + C, anchors]` with the given anchors first and zeros elsewhere."""
    classes = len(scores[0])
    image = np.zeros((4 + classes, anchors), dtype=np.float32)
    for index, (box, score) in enumerate(zip(boxes, scores, strict=True)):
        image[:4, index] = box
        image[4:, index] = score
    return image


def test_decode_yolov8_channels_first_and_last_agree() -> None:
    image = yolov8_image([[50, 50, 20, 10], [10, 10, 4, 4]], [[0.1, 0.8], [0.2, 0.1]])
    for layout in (image, image.T):
        found = decode_yolov8(layout, 0.25)
        assert found.boxes.tolist() == [[40, 45, 60, 55]]
        assert found.classes.tolist() == [1] and found.scores.tolist() == pytest.approx([0.8])


def test_a_yolov8_seg_heads_mask_coefficients_are_not_read_as_classes() -> None:
    """A raw YOLOv8 / YOLO11 -seg head: 4 box, C class and 32 mask-coefficient rows. The
    coefficients are unbounded (5.0 here): read as classes they would win every anchor."""
    image = yolov8_image([[50, 50, 20, 10], [10, 10, 4, 4]], [[0.1, 0.8], [0.2, 0.1]], anchors=64)
    seg = np.concatenate([image, np.full((32, image.shape[1]), 5.0, np.float32)], axis=0)
    assert decode_yolov8(seg, 0.25).classes.max() >= 2, "without extras: coefficients taken for classes"
    for layout in (seg, seg.T):
        found = decode_yolov8(layout, 0.25, extras=32)
        assert found.boxes.tolist() == [[40, 45, 60, 55]]
        assert found.classes.tolist() == [1] and found.scores.tolist() == pytest.approx([0.8])
    with pytest.raises(InputError, match=r"extras = 32 expects \[4 \+ classes \+ 32, anchors\], got"):
        decode_yolov8(image, 0.25, extras=32)
    spec = {"kind": "detection", "output": "out", "extras": 32}
    assert DetectionTask.model_validate({**spec, "head": "yolov8"}).extras == 32
    with pytest.raises(ValidationError, match="`extras` is for head 'yolov8'"):
        DetectionTask.model_validate({**spec, "head": "yolov5"})


def test_decode_yolov5_multiplies_objectness_and_class_probability() -> None:
    image = np.array([[50, 50, 20, 10, 0.5, 0.9, 0.1], [5, 5, 2, 2, 0.9, 0.2, 0.25]], dtype=np.float32)
    found = decode_yolov5(image, 0.3)
    assert found.classes.tolist() == [0] and found.scores.tolist() == pytest.approx([0.45])
    assert found.boxes.tolist() == [[40, 45, 60, 55]]


def test_decode_yolov10_keeps_corners_and_classes() -> None:
    image = np.array([[1, 2, 3, 4, 0.9, 7], [0, 0, 1, 1, 0.1, 2], [0, 0, 1, 1, np.nan, 2]], dtype=np.float32)
    found = decode_yolov10(image, 0.25)
    assert found.boxes.tolist() == [[1, 2, 3, 4]] and found.classes.tolist() == [7]
    with pytest.raises(InputError, match=r"yolov10 expects \[detections, 6 or more\], got \[3, 5\]"):
        decode_yolov10(np.zeros((3, 5)), 0.25)
    # an end-to-end YOLO11n-seg export (Ultralytics, nms=True): 32 mask coefficients after the six
    masked = np.concatenate([image, np.full((3, 32), 5.0, np.float32)], axis=1)
    again = decode_yolov10(masked, 0.25)
    assert again.boxes.tolist() == [[1, 2, 3, 4]] and again.classes.tolist() == [7]
    assert again.scores.tolist() == found.scores.tolist()


# ---------------------------------------------------------------- detection verdicts


def stacked_yolov8(*images: np.ndarray) -> dict[str, np.ndarray]:
    return {"out": np.stack(images)[:, None]}


def test_detection_counts_extra_detections_by_class_and_sample() -> None:
    spec = DetectionTask(output="out", head="yolov8", class_names=["cat", "dog"])
    one = yolov8_image([[50, 50, 20, 20]], [[0.9, 0.0]])
    many = yolov8_image(
        [[50, 50, 20, 20], [150, 50, 20, 20], [250, 50, 20, 20]], [[0.9, 0.0], [0, 0.5], [0, 0.6]]
    )
    outcome = compare_task(spec, stacked_yolov8(one, one), stacked_yolov8(one, many))
    assert not outcome.passed
    assert outcome.failures == [
        "sample 1: 2 extra detections of class 1 'dog' (golden 0, candidate 2); recall 1.00, precision 0.33 "
        "< 0.90"
    ]


def test_detection_reports_class_flips_and_misses() -> None:
    spec = DetectionTask(output="out", head="yolov8")
    golden = yolov8_image([[50, 50, 20, 20]], [[0.9, 0.1]])
    flipped = yolov8_image([[50, 50, 20, 20]], [[0.1, 0.8]])
    outcome = compare_task(spec, stacked_yolov8(golden), stacked_yolov8(flipped))
    assert outcome.failures == [  # most telling first (issue 28): the flip, then what it counts as
        "sample 0: class 0 detected as class 1 (IoU 1.00, score 0.90 → 0.80); 1 class flips > 0",
        "sample 0: 1 missed detection of class 0 (golden 1, candidate 0); recall 0.00 < 0.90, precision "
        "0.00 < 0.90",
        "sample 0: 1 extra detection of class 1 (golden 0, candidate 1); recall 0.00 < 0.90, precision 0.00 "
        "< 0.90",
    ]


def test_detection_excuses_scores_just_under_the_threshold() -> None:
    """0.26 golden vs 0.24 candidate is rounding; 0.26 vs 0.10 is a lost object."""
    spec = DetectionTask(output="out", head="yolov8")
    golden = yolov8_image([[50, 50, 20, 20]], [[0.26]])
    outcome = compare_task(
        spec, stacked_yolov8(golden), stacked_yolov8(yolov8_image([[50, 50, 20, 20]], [[0.24]]))
    )
    assert outcome.passed, outcome.failures
    assert outcome.comparison is not None and outcome.comparison.kind == "detection"
    assert outcome.comparison.samples[0].excused_golden == 1
    lost = compare_task(
        spec, stacked_yolov8(golden), stacked_yolov8(yolov8_image([[50, 50, 20, 20]], [[0.10]]))
    )
    assert lost.failures == [
        "sample 0: 1 missed detection of class 0 (golden 1, candidate 0); recall 0.00 < 0.90, precision 1.00"
    ]


def test_detection_labels_the_model_batch_when_it_has_more_than_one_image() -> None:
    spec = DetectionTask(output="out", head="yolov10")
    golden = np.zeros((1, 2, 3, 6), dtype=np.float32)
    golden[0, 1, 0] = [0, 0, 10, 10, 0.9, 3]
    outcome = compare_task(spec, {"out": golden}, {"out": np.zeros_like(golden)})
    assert outcome.failures == [
        "sample 0, batch 1: 1 missed detection of class 3 (golden 1, candidate 0); recall 0.00 < 0.90, "
        "precision 1.00"
    ]


def test_candidate_shape_change_fails_and_missing_golden_output_raises() -> None:
    spec = DetectionTask(output="out", head="yolov10")
    golden = {"out": np.zeros((1, 1, 3, 6), dtype=np.float32)}
    outcome = compare_task(spec, golden, {"out": np.zeros((1, 1, 4, 6), dtype=np.float32)})
    assert not outcome.passed and outcome.failures == [
        "output 'out' has shape [1, 1, 4, 6], the golden has [1, 1, 3, 6]"
    ]
    assert not compare_task(spec, golden, {}).passed
    with pytest.raises(InputError, match="no output 'out' in the golden outputs"):
        compare_task(spec, {}, golden)


# ---------------------------------------------------------------- classification


def test_softmax_and_top_k() -> None:
    np.testing.assert_allclose(softmax(np.array([[1000.0, 1000.0]])), [[0.5, 0.5]])
    assert top_k(np.array([0.1, 0.5, 0.5, 0.2]), 3).tolist() == [1, 2, 3]


def test_classification_names_the_changed_class() -> None:
    spec = ClassificationTask(output="p", top_k=2, class_names=["cat", "dog", "fox"])
    golden = np.array([[[0.7, 0.2, 0.1]], [[0.1, 0.8, 0.1]]], dtype=np.float32)
    candidate = golden.copy()
    candidate[1, 0] = [0.1, 0.3, 0.6]
    outcome = compare_task(spec, {"p": golden}, {"p": candidate})
    assert outcome.failures == [
        "sample 1: top-1 changed from class 1 'dog' (p 0.800) to class 2 'fox' (p 0.600); top-1 agreement "
        "0.50 < 1.00",
        "sample 1: top-2 overlap 0.50; mean top-2 agreement 0.75 < 0.80",
        "sample 1: probability of class 2 'fox' changed by 0.500 > 0.100 (0.100 → 0.600)",
    ]
    assert compare_task(spec, {"p": golden}, {"p": golden + 1e-4}).passed


def test_classification_logits_through_softmax() -> None:
    spec = ClassificationTask(output="p", softmax=True, max_probability_change=0.01)
    logits = np.array([[2.0, 1.0, 0.0]], dtype=np.float32)
    outcome = compare_task(spec, {"p": logits}, {"p": logits + 5.0})  # a constant shift is no change
    assert outcome.passed, outcome.failures


# ---------------------------------------------------------------- segmentation


def test_class_iou_and_segmentation_failure() -> None:
    assert [(c.class_id, c.iou) for c in class_iou(np.array([0, 1, 1, 2]), np.array([0, 1, 2, 2]))] == [
        (0, 1.0),
        (1, 0.5),
        (2, 0.5),
    ]
    spec = SegmentationTask(output="seg")
    golden = np.zeros((1, 1, 2, 4, 4), dtype=np.float32)
    golden[0, 0, 1, :2] = 1.0
    candidate = golden.copy()
    candidate[0, 0, 1, :, :] = 1.0
    outcome = compare_task(spec, {"seg": golden}, {"seg": candidate})
    assert outcome.failures == [
        "sample 0: pixel agreement 0.5000 < 0.9900, mean IoU 0.25 < 0.90; worst class 0 IoU 0.000 "
        "(golden 8 px, candidate 0 px)"
    ]


def test_single_channel_maps_need_a_threshold() -> None:
    data = {"map": np.zeros((1, 1, 1, 4, 4), dtype=np.float32)}
    with pytest.raises(InputError, match="single channel: set threshold"):
        compare_task(SegmentationTask(output="map"), data, data)
    assert compare_task(SegmentationTask(output="map", threshold=0.3), data, data).passed


# ---------------------------------------------------------------- CTC


def test_greedy_decode_collapses_repeats_and_drops_blanks() -> None:
    steps = np.eye(4)[[1, 1, 0, 1, 2, 2, 0, 0, 3]]
    assert greedy_decode(steps, blank=0) == [1, 1, 2, 3]
    assert greedy_decode(np.zeros((0, 4)), blank=0) == []


def test_edit_distance_and_cer() -> None:
    assert edit_distance([1, 2, 3], [1, 3]) == 1
    assert edit_distance("kitten", "sitting") == 3  # type: ignore[arg-type]
    assert character_error_rate([1, 2, 3, 4], [1, 9, 3, 4]) == 0.25
    assert character_error_rate([], []) == 0.0 and character_error_rate([], [1]) == 1.0


def test_render_text_skips_the_blank_and_marks_unknown_indices() -> None:
    assert render_text([1, 2, 9], ["a", "b"], blank=0) == "ab⟨9⟩"
    assert render_text([0, 1], ["a", "b", "-"], blank=2) == "ab"


def test_ctc_alphabet_file_is_resolved_against_the_root(tmp_path: Path) -> None:
    root = tmp_path
    (root / "chars.txt").write_text("a\nb\nc\n", encoding="utf-8")
    spec = CtcTask(output="rec", alphabet_file="chars.txt")
    golden = np.eye(4, dtype=np.float32)[[1, 0, 2, 3]][None, None]
    candidate = np.eye(4, dtype=np.float32)[[1, 0, 2, 2]][None, None]
    outcome = compare_task(spec, {"rec": golden}, {"rec": candidate}, root=root)
    assert outcome.failures == ["sample 0: text changed 'abc' → 'ab': 1 edit, CER 0.333 > 0.020"]


def test_an_alphabet_file_outside_the_project_is_refused_as_the_lock_refuses_it(tmp_path: Path) -> None:
    """One reader for the lock and for a task not locked yet: the compare path read any path
    joined to the root, unbounded, where the lock's refused a path leaving the project."""
    from baseline.errors import BaselineError

    root = tmp_path / "project"
    root.mkdir()
    (tmp_path / "outside.txt").write_text("a\nb\n", encoding="utf-8")
    golden = np.eye(3, dtype=np.float32)[[1, 0, 2]][None, None]
    spec = CtcTask(output="rec", alphabet_file="../outside.txt")
    with pytest.raises(
        BaselineError, match=r"ctc alphabet_file: path '\.\./outside\.txt' leaves the project"
    ):
        compare_task(spec, {"rec": golden}, {"rec": golden}, root=root)
    (root / "big.txt").write_bytes(b"a\n" * (2 * 1024 * 1024 + 1))
    with pytest.raises(BaselineError, match="is not a character list"):
        compare_task(
            CtcTask(output="rec", alphabet_file="big.txt"), {"rec": golden}, {"rec": golden}, root=root
        )


def test_paddleocr_space_class_follows_the_dictionary_when_space_char_is_set(tmp_path: Path) -> None:
    """PaddleOCR (`use_space_char=True`) appends a space after its dictionary's lines: a model of
    `len(dictionary) + 2` classes showed its last class as `⟨3⟩`. `space_char = true` names it,
    from the file and from the symbols the lock pins in its place."""
    from baseline.tasks.locking import locked_tasks

    (tmp_path / "dict.txt").write_text("a\nb\n", encoding="utf-8")
    golden = np.eye(4, dtype=np.float32)[[1, 0, 3, 2]][None, None]  # a, blank, space, b
    candidate = np.eye(4, dtype=np.float32)[[1, 0, 3, 3]][None, None]
    expected = ["sample 0: text changed 'a b' → 'a ': 1 edit, CER 0.333 > 0.020"]
    spec = CtcTask(output="rec", alphabet_file="dict.txt", space_char=True)
    [pinned] = locked_tasks([spec], lambda path, _: tmp_path / path, "models[0]", tmp_path)
    assert isinstance(pinned, CtcTask) and pinned.alphabet == ["a", "b"] and pinned.space_char
    for task in (spec, pinned):
        outcome = compare_task(task, {"rec": golden}, {"rec": candidate}, root=tmp_path)
        assert outcome.failures == expected
    without = compare_task(CtcTask(output="rec", alphabet=["a", "b"]), {"rec": golden}, {"rec": candidate})
    assert without.failures == ["sample 0: text changed 'a⟨3⟩b' → 'a⟨3⟩': 1 edit, CER 0.333 > 0.020"]


# ---------------------------------------------------------------- parts


def test_parts_slice_after_the_sample_axis_with_per_channel_numbers() -> None:
    outputs = {"out": np.arange(2 * 1 * 6 * 3, dtype=np.float32).reshape(2, 1, 6, 3)}
    boxes = OutputPart(output="out", name="boxes", axis=1, start=0, stop=4)
    scores = OutputPart(output="out", name="scores", axis=1, start=4, per_channel=True)
    parts = split_parts([boxes, scores], outputs)
    assert parts["out:boxes"].shape == (2, 1, 4, 3) and parts["out:scores"].shape == (2, 1, 2, 3)
    stats = part_statistics(scores, outputs)
    assert [c.index for c in stats.channels] == [4, 5] and stats.channels[0].min == 12.0
    shifted = {"out": outputs["out"].copy()}
    shifted["out"][:, :, 5] += 0.5
    comparison = compare_part(scores, outputs, shifted)
    assert comparison.channel_max_abs == [0.0, 0.5] and comparison.max_abs == 0.5
    with pytest.raises(InputError, match="does not fit axis 1"):
        split_parts([OutputPart(output="out", name="x", start=7)], outputs)


# ---------------------------------------------------------------- schema


def test_task_spec_is_chosen_by_kind_with_defaults() -> None:
    spec = TypeAdapter(TaskSpec).validate_python({"kind": "detection", "output": "output0", "head": "yolov8"})
    assert isinstance(spec, DetectionTask) and spec.min_recall == 0.9 and spec.match_iou == 0.5
    assert TaskIntent.model_validate({"tasks": [{"kind": "ctc", "output": "rec"}]}).tasks[0].kind == "ctc"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "detection", "output": "o", "head": "ssd"}, "detection.head"),
        ({"kind": "detection", "output": "o", "head": "yolov8", "min_recall": 1.5}, "detection.min_recall"),
        ({"kind": "classification", "output": "o", "top_k": 0}, "classification.top_k"),
        (
            {"kind": "ctc", "output": "o", "alphabet": ["a"], "alphabet_file": "a.txt"},
            "set alphabet or alphabet_file",
        ),
        ({"kind": "ctc", "output": "o", "space_char": True}, "space_char extends an alphabet"),
        ({"kind": "segmentation", "output": "o", "typo": 1}, "segmentation.typo"),
        ({"kind": "pose", "output": "o"}, "does not match any of the expected tags"),
    ],
)
def test_task_spec_errors_name_the_field(data: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        TypeAdapter(TaskSpec).validate_python(data)


def test_part_validation() -> None:
    with pytest.raises(ValidationError, match="stop \\(2\\) must be greater than start \\(4\\)"):
        OutputPart(output="o", name="p", start=4, stop=2)
    duplicate = {"output": "o", "name": "p"}
    with pytest.raises(ValidationError, match="'p' is declared twice for output 'o'"):
        TaskIntent.model_validate({"parts": [duplicate, duplicate]})
