"""Detection: decode each head to boxes, suppress duplicates, match candidate to golden by class.

What the decoders assume (one image, the model's batch dim already removed):
- `yolov8`: `[4 + C, A]` or `[A, 4 + C]` (the shorter axis is taken as channels, since
  anchors far outnumber classes): cx, cy, w, h, then C class scores that are already
  probabilities (Ultralytics export, `nms=False`). One label per anchor: its best class.
  Raw heads over several outputs (`yolov8-dfl`, `retinaface`) are decoded in `heads`.
- `yolov5`: `[A, 5 + C]`: cx, cy, w, h, objectness, C class probabilities, all already
  through the sigmoid and scaled to pixels; score = objectness × best class probability.
- `yolov10`: `[K, 6]`: x1, y1, x2, y2, score, class; already one box per object, no NMS (further
  columns, an end-to-end seg or pose export's mask coefficients or keypoints, are not read).
Boxes are compared in the model's own coordinates (usually input pixels); nothing is
rescaled to the original image.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from baseline.errors import InputError
from baseline.models.task import (
    MAX_DRAWN_BOXES,
    Box,
    ClassCount,
    ClassFlip,
    DetectionComparison,
    DetectionSample,
    DetectionTask,
    SampleRef,
)
from baseline.tasks import heads
from baseline.tasks.kinds import ChangedRows, Outputs, TaskContext, samples_counted
from baseline.tasks.samples import split_images
from baseline.tasks.verdicts import class_label, detection_failures


@dataclass(frozen=True)
class Detections:
    """Boxes `[n, 4]` as x1, y1, x2, y2, with their scores `[n]` and classes `[n]`."""

    boxes: np.ndarray
    scores: np.ndarray
    classes: np.ndarray

    def __len__(self) -> int:
        return int(self.scores.shape[0])

    def take(self, indices: np.ndarray) -> Detections:
        return Detections(self.boxes[indices], self.scores[indices], self.classes[indices])


def xywh_to_xyxy(boxes: np.ndarray) -> np.ndarray:
    """Centre, width, height → corners."""
    half = boxes[:, 2:4] / 2
    return np.concatenate([boxes[:, :2] - half, boxes[:, :2] + half], axis=1)


def box_iou(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """IoU of every box in `first` `[n, 4]` with every box in `second` `[m, 4]` (x1, y1, x2, y2) → `[n, m]`.

    Degenerate boxes (zero or negative area) have IoU 0 with everything; NaN coordinates give 0.
    """
    top_left = np.maximum(first[:, None, :2], second[None, :, :2])
    bottom_right = np.minimum(first[:, None, 2:], second[None, :, 2:])
    overlap = np.clip(bottom_right - top_left, 0, None).prod(axis=2)
    union = _area(first)[:, None] + _area(second)[None, :] - overlap
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = np.where(union > 0, overlap / union, 0.0)
    return np.nan_to_num(iou, nan=0.0)


def _area(boxes: np.ndarray) -> np.ndarray:
    return np.asarray(np.clip(boxes[:, 2:] - boxes[:, :2], 0, None).prod(axis=1))


def nms(detections: Detections, iou_threshold: float) -> np.ndarray:
    """Indices kept by per-class non-maximum suppression, highest score first.

    Classes are kept apart by shifting each class's boxes to a region of their own, so one
    pass suppresses only within a class (the torchvision `batched_nms` trick).
    """
    if not len(detections):
        return np.zeros(0, dtype=np.int64)
    extent = float(np.nanmax(np.abs(detections.boxes))) + 1.0
    boxes = detections.boxes + (detections.classes.astype(np.float64) * extent)[:, None]
    order = np.argsort(-detections.scores, kind="stable")
    kept: list[int] = []
    while order.size:
        best, rest = order[0], order[1:]
        kept.append(int(best))
        order = rest[box_iou(boxes[best : best + 1], boxes[rest])[0] <= iou_threshold]
    return np.asarray(kept, dtype=np.int64)


def decode_yolov8(image: np.ndarray, threshold: float, extras: int = 0) -> Detections:
    """Anchor-free decoded head → detections scoring above `threshold` (before NMS). The last
    `extras` rows (a -seg head's mask coefficients) are not classes and are not read."""
    rows = image.T if image.shape[0] < image.shape[1] else image
    if extras:
        _require_columns(
            rows, 5 + extras, f"yolov8 with extras = {extras} expects [4 + classes + {extras}, anchors]"
        )
    _require_columns(rows, 5, "yolov8 expects [4 + classes, anchors]")
    class_scores = rows[:, 4 : rows.shape[1] - extras]
    return _above(rows[:, :4], class_scores.max(axis=1), class_scores.argmax(axis=1), threshold, xywh=True)


def decode_yolov5(image: np.ndarray, threshold: float) -> Detections:
    """Anchor-based decoded head with objectness → detections scoring above `threshold` (before NMS)."""
    _require_columns(image, 6, "yolov5 expects [anchors, 5 + classes]")
    class_scores = image[:, 5:] * image[:, 4:5]
    return _above(image[:, :4], class_scores.max(axis=1), class_scores.argmax(axis=1), threshold, xywh=True)


def decode_yolov10(image: np.ndarray, threshold: float) -> Detections:
    """End-to-end head → detections scoring above `threshold` (final, no NMS needed). Columns
    past the sixth (an Ultralytics end-to-end seg / pose export's mask coefficients or
    keypoints) are not read."""
    _require_columns(image, 6, "yolov10 expects [detections, 6 or more]")
    classes = np.rint(np.nan_to_num(image[:, 5], nan=-1)).astype(np.int64)
    return _above(image[:, :4], image[:, 4], classes, threshold, xywh=False)


def _require_columns(rows: np.ndarray, minimum: int, message: str) -> None:
    if rows.ndim != 2 or rows.shape[1] < minimum:
        raise InputError(f"{message}, got {list(rows.shape)}")


def _above(
    boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray, threshold: float, xywh: bool
) -> Detections:
    keep = np.flatnonzero(scores > threshold)  # NaN scores compare False and drop out
    corners = boxes[keep].astype(np.float64)
    return Detections(
        xywh_to_xyxy(corners) if xywh else corners,
        scores[keep].astype(np.float64),
        classes[keep].astype(np.int64),
    )


def decode_yolov8_dfl(spec: DetectionTask, branches: list[np.ndarray], threshold: float) -> Detections:
    """Raw DFL branches (rknn_model_zoo YOLOv8 / YOLO11 export) → detections above `threshold`."""
    assert spec.input_size is not None  # the spec's validator requires it for raw heads
    corners, class_scores = heads.decode_yolov8_dfl(branches, spec.input_size)
    return _above(corners, class_scores.max(axis=1), class_scores.argmax(axis=1), threshold, xywh=False)


def decode_retinaface(spec: DetectionTask, branches: list[np.ndarray], threshold: float) -> Detections:
    """RetinaFace loc / conf (/ landm) against its priors → face detections (class 0) above `threshold`."""
    assert spec.input_size is not None
    corners, scores = heads.decode_retinaface(branches[0], branches[1], spec.input_size)
    return _above(corners, scores, np.zeros(len(scores), dtype=np.int64), threshold, xywh=False)


DECODERS = {"yolov8": decode_yolov8, "yolov5": decode_yolov5, "yolov10": decode_yolov10}
RAW_DECODERS = {"yolov8-dfl": decode_yolov8_dfl, "retinaface": decode_retinaface}
IMAGE_DIMS = {"yolov8-dfl": 3}
"""Dims of one image's output per head, after the sample and batch axes (2 unless listed)."""


def detect(spec: DetectionTask, image: list[np.ndarray], threshold: float) -> Detections:
    """Final detections of one image (its outputs, in `spec.read` order): decode, keep the best
    `max_candidates`, NMS.

    End-to-end heads (`yolov10`) are already one box per object and skip the last two steps.
    """
    raw = RAW_DECODERS.get(spec.head)
    if raw is not None:
        found = raw(spec, image, threshold)
    elif spec.extras:  # the spec allows extras on `yolov8` only
        found = decode_yolov8(joined(image), threshold, spec.extras)
    else:
        found = DECODERS[spec.head](joined(image), threshold)
    if spec.head == "yolov10":
        return found
    strongest = np.argsort(-found.scores, kind="stable")[: spec.max_candidates]
    found = found.take(strongest)
    return found.take(nms(found, spec.nms_iou))


def joined(image: list[np.ndarray]) -> np.ndarray:
    """A decoded head's one array from the outputs a graph cut made of it (`outputs` =
    [boxes, scores]: the inputs of the head's last Concat), joined along the axis they differ in:
    `[4, A]` and `[C, A]` make `[4 + C, A]`; `[A, 4]` and `[A, C]` make `[A, 4 + C]`."""
    if len(image) == 1:
        return image[0]
    shapes = [array.shape for array in image]
    if any(len(shape) != 2 for shape in shapes):
        raise InputError(f"detection outputs of shapes {shapes}: a cut head's parts are [channels, anchors]")
    if len({shape[1] for shape in shapes}) == 1:
        return np.concatenate(image, axis=0)
    if len({shape[0] for shape in shapes}) == 1:
        return np.concatenate(image, axis=1)
    raise InputError(f"detection outputs of shapes {shapes} share no anchor axis to join them on")


def greedy_match(
    golden: Detections, candidate: Detections, min_iou: float, same_class: bool
) -> list[tuple[int, int, float]]:
    """Pairs `(golden index, candidate index, IoU)`, highest IoU first, each box used at most once."""
    if not len(golden) or not len(candidate):
        return []
    iou = box_iou(golden.boxes, candidate.boxes)
    if same_class:
        iou = np.where(golden.classes[:, None] == candidate.classes[None, :], iou, -1.0)
    rows, cols = np.nonzero(iou >= min_iou)
    order = np.argsort(-iou[rows, cols], kind="stable")
    used_golden: set[int] = set()
    used_candidate: set[int] = set()
    pairs = []
    for row, col in zip(rows[order].tolist(), cols[order].tolist(), strict=True):
        if row not in used_golden and col not in used_candidate:
            used_golden.add(row)
            used_candidate.add(col)
            pairs.append((row, col, float(iou[row, col])))
    return pairs


def compare_detection(
    spec: DetectionTask, golden: np.ndarray | list[np.ndarray], candidate: np.ndarray | list[np.ndarray]
) -> DetectionComparison:
    """Per-image precision, recall, matched IoU and class flips of the candidate's detections.

    `golden` and `candidate` hold the output of a one-output head, or the outputs a raw head
    reads, each stacked over samples."""
    gold_images, cand_images = image_outputs(spec, golden), image_outputs(spec, candidate)
    samples = [
        _compare_image(spec, where, gold, cand)
        for (where, gold), (_, cand) in zip(gold_images, cand_images, strict=True)
    ]
    matched = sum(s.matched for s in samples)
    counted_golden = sum(s.golden - s.excused_golden for s in samples)
    counted_candidate = sum(s.candidate - s.excused_candidate for s in samples)
    ious = [s.mean_iou * s.matched for s in samples if s.mean_iou is not None]
    return DetectionComparison(
        samples=samples,
        precision=_ratio(matched, counted_candidate),
        recall=_ratio(matched, counted_golden),
        mean_iou=sum(ious) / matched if matched else None,
        class_flips=sum(len(s.class_flips) for s in samples),
    )


def image_outputs(
    spec: DetectionTask, outputs: np.ndarray | list[np.ndarray]
) -> list[tuple[SampleRef, list[np.ndarray]]]:
    """Per image, its arrays of every output read (the sample labels are the first output's)."""
    arrays = outputs if isinstance(outputs, list) else [outputs]
    ndim = IMAGE_DIMS.get(spec.head, 2)
    split = [
        split_images(array, ndim, f"detection output {name!r}")
        for array, name in zip(arrays, spec.read, strict=True)
    ]
    counts = {len(images) for images in split}
    if len(counts) > 1:
        raise InputError(f"detection outputs {spec.read}: different numbers of samples {sorted(counts)}")
    return [(per_output[0][0], [image for _, image in per_output]) for per_output in zip(*split, strict=True)]


def _ratio(part: int, whole: int) -> float:
    """part / whole, 1.0 when there is nothing to find (no detections on either side agree)."""
    return part / whole if whole else 1.0


def _compare_image(
    spec: DetectionTask, where: SampleRef, golden: list[np.ndarray], candidate: list[np.ndarray]
) -> DetectionSample:
    gold = detect(spec, golden, spec.score_threshold)
    cand = detect(spec, candidate, spec.score_threshold)
    matches = greedy_match(gold, cand, spec.match_iou, same_class=True)
    lost_golden = _unused(len(gold), {g for g, _, _ in matches})
    lost_candidate = _unused(len(cand), {c for _, c, _ in matches})
    flips = greedy_match(gold.take(lost_golden), cand.take(lost_candidate), spec.match_iou, same_class=False)
    flipped_golden = {int(lost_golden[g]) for g, _, _ in flips}
    flipped_candidate = {int(lost_candidate[c]) for _, c, _ in flips}
    # A box on one side only is rounding, not regression, when the other side scores it
    # just under the threshold (0.251 vs 0.249).
    loose = max(spec.score_threshold - spec.score_margin, 1e-6)
    excused_golden = _excused(
        gold, lost_golden, flipped_golden, detect(spec, candidate, loose), spec.match_iou
    )
    excused_candidate = _excused(
        cand, lost_candidate, flipped_candidate, detect(spec, golden, loose), spec.match_iou
    )
    counted_golden = len(gold) - len(excused_golden)
    counted_candidate = len(cand) - len(excused_candidate)
    return DetectionSample(
        where=where,
        golden=len(gold),
        candidate=len(cand),
        matched=len(matches),
        excused_golden=len(excused_golden),
        excused_candidate=len(excused_candidate),
        precision=_ratio(len(matches), counted_candidate),
        recall=_ratio(len(matches), counted_golden),
        mean_iou=float(np.mean([iou for _, _, iou in matches])) if matches else None,
        classes=_class_counts(gold, cand, matches, excused_golden, excused_candidate),
        class_flips=[
            ClassFlip(
                golden_class=int(gold.classes[lost_golden[g]]),
                candidate_class=int(cand.classes[lost_candidate[c]]),
                iou=iou,
                golden_score=float(gold.scores[lost_golden[g]]),
                candidate_score=float(cand.scores[lost_candidate[c]]),
            )
            for g, c, iou in flips
        ],
        golden_boxes=drawn_boxes(gold),
        candidate_boxes=drawn_boxes(cand),
    )


def drawn_boxes(found: Detections) -> list[Box]:
    """The best `MAX_DRAWN_BOXES` detections as records (NMS left them best first)."""
    return [
        Box(x1=x1, y1=y1, x2=x2, y2=y2, score=score, class_id=class_id)
        for (x1, y1, x2, y2), score, class_id in zip(
            np.nan_to_num(found.boxes[:MAX_DRAWN_BOXES]).tolist(),
            np.nan_to_num(found.scores[:MAX_DRAWN_BOXES]).tolist(),
            found.classes[:MAX_DRAWN_BOXES].tolist(),
            strict=True,
        )
    ]


def _unused(count: int, used: set[int]) -> np.ndarray:
    return np.asarray([index for index in range(count) if index not in used], dtype=np.int64)


def _excused(
    found: Detections, lost: np.ndarray, flipped: set[int], other_loose: Detections, match_iou: float
) -> set[int]:
    """Lost, unflipped detections the other side has just under the threshold (same class and place)."""
    candidates = np.asarray([index for index in lost.tolist() if index not in flipped], dtype=np.int64)
    pairs = greedy_match(found.take(candidates), other_loose, match_iou, same_class=True)
    return {int(candidates[index]) for index, _, _ in pairs}


def _class_counts(
    golden: Detections,
    candidate: Detections,
    matches: list[tuple[int, int, float]],
    excused_golden: set[int],
    excused_candidate: set[int],
) -> list[ClassCount]:
    matched_golden = {g for g, _, _ in matches}
    matched_candidate = {c for _, c, _ in matches}
    counts = []
    for class_id in sorted(set(golden.classes.tolist()) | set(candidate.classes.tolist())):
        in_golden = np.flatnonzero(golden.classes == class_id).tolist()
        in_candidate = np.flatnonzero(candidate.classes == class_id).tolist()
        ious = [iou for g, _, iou in matches if golden.classes[g] == class_id]
        counts.append(
            ClassCount(
                class_id=class_id,
                golden=len(in_golden),
                candidate=len(in_candidate),
                matched=len(ious),
                missed=sum(1 for g in in_golden if g not in matched_golden and g not in excused_golden),
                extra=sum(
                    1 for c in in_candidate if c not in matched_candidate and c not in excused_candidate
                ),
                mean_iou=float(np.mean(ious)) if ious else None,
            )
        )
    return counts


class Detection:
    """The `detection` kind (see `baseline.tasks.kinds`)."""

    def title(self, spec: DetectionTask) -> str:
        return f"detection on {spec.output!r}"

    def compare(
        self, spec: DetectionTask, golden: Outputs, candidate: Outputs, context: TaskContext
    ) -> tuple[DetectionComparison, list[str]]:
        gold = [np.asarray(golden[name]) for name in spec.read]
        cand = [np.asarray(candidate[name]) for name in spec.read]
        several = bool(spec.outputs)  # a raw head, or a decoded one a graph cut split
        comparison = (
            compare_detection(spec, gold, cand) if several else compare_detection(spec, gold[0], cand[0])
        )
        return comparison, detection_failures(spec, comparison)

    def headline(self, comparison: DetectionComparison) -> str:
        iou = "n/a" if comparison.mean_iou is None else f"{comparison.mean_iou:.3f}"
        return (
            f"recall {comparison.recall:.2f}, precision {comparison.precision:.2f}, mean IoU {iou}, "
            f"{comparison.class_flips} class flips {samples_counted(comparison)}"
        )

    def worst(self, comparison: DetectionComparison) -> dict[str, float]:
        ious = [s.mean_iou for s in comparison.samples if s.mean_iou is not None]
        return {
            "min_recall": min((s.recall for s in comparison.samples), default=1.0),
            "min_precision": min((s.precision for s in comparison.samples), default=1.0),
            "min_mean_iou": min(ious, default=1.0),
            "max_class_flips": float(comparison.class_flips),
        }

    def changed(self, comparison: DetectionComparison, names: list[str]) -> ChangedRows:
        """Detections are drawn on the photographs; the table lists the class flips."""
        rows = [
            (
                s.where.label,
                f"{class_label(f.golden_class, names)} ({f.golden_score:.2f})",
                f"{class_label(f.candidate_class, names)} ({f.candidate_score:.2f})",
                f"{f.iou:.2f}",
            )
            for s in comparison.samples
            for f in s.class_flips
        ]
        return ChangedRows(("sample", "golden class", "candidate class", "IoU"), rows)

    def class_names(self, spec: DetectionTask) -> list[str]:
        return spec.class_names


KIND = Detection()
