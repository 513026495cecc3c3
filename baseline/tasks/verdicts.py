"""From comparison numbers to failure lines: each names the sample, the class and the numbers."""

from __future__ import annotations

from collections.abc import Sequence

from baseline.models.task import (
    ClassificationComparison,
    ClassificationTask,
    CtcComparison,
    CtcTask,
    DetectionComparison,
    DetectionSample,
    DetectionTask,
    SegmentationComparison,
    SegmentationTask,
)


def class_label(class_id: int, names: Sequence[str]) -> str:
    """`class 3 'Text'` when the spec names its classes, else `class 3`."""
    return f"class {class_id} {names[class_id]!r}" if 0 <= class_id < len(names) else f"class {class_id}"


def _bound(value: float, limit: float, digits: int = 2) -> str:
    """`0.12 < 0.90` when a lower bound is broken, else just `0.95`."""
    return f"{value:.{digits}f} < {limit:.{digits}f}" if value < limit else f"{value:.{digits}f}"


def classification_failures(spec: ClassificationTask, comparison: ClassificationComparison) -> list[str]:
    failures = []
    names = spec.class_names
    if comparison.top1_agreement < spec.min_top1_agreement:
        agreement = _bound(comparison.top1_agreement, spec.min_top1_agreement)
        failures += [
            f"{s.where.label}: top-1 changed from {class_label(s.golden_top1, names)} "
            f"(p {s.golden_top1_probability:.3f}) to {class_label(s.candidate_top1, names)} "
            f"(p {s.candidate_top1_probability:.3f}); top-1 agreement {agreement}"
            for s in comparison.samples
            if s.golden_top1 != s.candidate_top1
        ]
    if comparison.topk_agreement < spec.min_topk_agreement:
        agreement = _bound(comparison.topk_agreement, spec.min_topk_agreement)
        failures += [
            f"{s.where.label}: top-{spec.top_k} overlap {s.topk_overlap:.2f}; "
            f"mean top-{spec.top_k} agreement {agreement}"
            for s in comparison.samples
            if s.topk_overlap < 1.0
        ]
    failures += [
        f"{s.where.label}: probability of {class_label(s.max_change_class, names)} changed by "
        f"{s.max_probability_change:.3f} > {spec.max_probability_change:.3f} "
        f"({s.max_change_golden_probability:.3f} → {s.max_change_candidate_probability:.3f})"
        for s in comparison.samples
        if s.max_probability_change > spec.max_probability_change
    ]
    return failures


def detection_failures(spec: DetectionTask, comparison: DetectionComparison) -> list[str]:
    """Most telling first, as the gate's summary quotes the first: class flips (a swap of two
    classes is one), then missed, then extra detections, then boxes that moved (statistics).
    A swap of class 7 for 3 also counts a missed 7 and an extra 3; the flip says what happened."""
    failures = []
    if comparison.class_flips > spec.max_class_flips:
        failures += [
            f"{s.where.label}: {class_label(flip.golden_class, spec.class_names)} detected as "
            f"{class_label(flip.candidate_class, spec.class_names)} (IoU {flip.iou:.2f}, score "
            f"{flip.golden_score:.2f} → {flip.candidate_score:.2f}); {comparison.class_flips} class flips "
            f"> {spec.max_class_flips}"
            for s in comparison.samples
            for flip in s.class_flips
        ]
    failures += [line for sample in comparison.samples for line in _misses(spec, sample, "missed")]
    failures += [line for sample in comparison.samples for line in _misses(spec, sample, "extra")]
    failures += [
        _moved_boxes(spec, sample, sample.mean_iou)
        for sample in comparison.samples
        if sample.mean_iou is not None and sample.mean_iou < spec.min_mean_iou
    ]
    return failures


def _misses(spec: DetectionTask, sample: DetectionSample, which: str) -> list[str]:
    """A sample's missed (recall below its floor) or extra (precision below) detections, by class."""
    where, names = sample.where.label, spec.class_names
    recall, precision = _bound(sample.recall, spec.min_recall), _bound(sample.precision, spec.min_precision)
    rates = f"recall {recall}, precision {precision}"
    if which == "missed" and sample.recall < spec.min_recall:
        return [
            f"{where}: {_count(c.missed, 'missed detection')} of {class_label(c.class_id, names)} "
            f"(golden {c.golden}, candidate {c.candidate}); {rates}"
            for c in sample.classes
            if c.missed
        ]
    if which == "extra" and sample.precision < spec.min_precision:
        return [
            f"{where}: {_count(c.extra, 'extra detection')} of {class_label(c.class_id, names)} "
            f"(golden {c.golden}, candidate {c.candidate}); {rates}"
            for c in sample.classes
            if c.extra
        ]
    return []


def _moved_boxes(spec: DetectionTask, sample: DetectionSample, mean_iou: float) -> str:
    worst = min((c for c in sample.classes if c.mean_iou is not None), key=lambda c: c.mean_iou or 0.0)
    return (
        f"{sample.where.label}: matched boxes moved: mean IoU {_bound(mean_iou, spec.min_mean_iou)} over "
        f"{_count(sample.matched, 'box')}; worst {class_label(worst.class_id, spec.class_names)}: "
        f"mean IoU {worst.mean_iou:.2f} over {worst.matched}"
    )


def _count(number: int, noun: str) -> str:
    plural = "es" if noun.endswith("x") else "s"
    return f"{number} {noun}{plural if number != 1 else ''}"


def segmentation_failures(spec: SegmentationTask, comparison: SegmentationComparison) -> list[str]:
    failures = []
    for sample in comparison.samples:
        if sample.pixel_agreement >= spec.min_pixel_agreement and sample.mean_iou >= spec.min_mean_iou:
            continue
        worst = min(sample.classes, key=lambda c: c.iou)
        agreement = _bound(sample.pixel_agreement, spec.min_pixel_agreement, digits=4)
        mean_iou = _bound(sample.mean_iou, spec.min_mean_iou)
        failures.append(
            f"{sample.where.label}: pixel agreement {agreement}, mean IoU {mean_iou}; "
            f"worst {class_label(worst.class_id, spec.class_names)} IoU {worst.iou:.3f} "
            f"(golden {worst.golden_pixels} px, candidate {worst.candidate_pixels} px)"
        )
    return failures


def ctc_failures(spec: CtcTask, comparison: CtcComparison) -> list[str]:
    return [
        f"{s.where.label}: text changed {s.golden_text!r} → {s.candidate_text!r}: "
        f"{_count(s.edit_distance, 'edit')}, CER {s.cer:.3f}"
        f"{f' > {spec.max_cer:.3f}' if s.cer > spec.max_cer else ''}"
        for s in comparison.samples
        if s.cer > spec.max_cer or (spec.require_equal_text and s.edit_distance > 0)
    ]
