"""Segmentation: per-pixel labels must agree, class by class.

Assumes scores per pixel along `class_axis`: the label is the argmax over several
channels, or `value > threshold` for a single channel (a probability map such as
DBNet's text map, whose own post-processing binarises it at a threshold too).
Outputs are `[(N,) C, H, W]` or any order with `class_axis` set: two spatial dims.
"""

from __future__ import annotations

import base64
import zlib

import numpy as np

from baseline.errors import InputError
from baseline.models.task import (
    ClassIoU,
    LabelMap,
    SampleRef,
    SegmentationComparison,
    SegmentationSample,
    SegmentationTask,
)
from baseline.tasks.kinds import ChangedRows, Outputs, TaskContext, samples_counted
from baseline.tasks.samples import class_last, split_images
from baseline.tasks.verdicts import class_label, segmentation_failures


def label_map(spec: SegmentationTask, scores: np.ndarray) -> np.ndarray:
    """Class labels from scores with the class axis last (NaN never counts as foreground)."""
    if scores.shape[-1] > 1:
        return np.asarray(np.argmax(np.nan_to_num(scores, nan=-np.inf), axis=-1))
    if spec.threshold is None:
        raise InputError(
            f"segmentation output {spec.output!r} has a single channel: set threshold (e.g. 0.3 for DBNet)"
        )
    return (scores[..., 0] > spec.threshold).astype(np.int64)


def class_iou(golden: np.ndarray, candidate: np.ndarray) -> list[ClassIoU]:
    """IoU per class present in either label map."""
    results = []
    for class_id in np.union1d(np.unique(golden), np.unique(candidate)).tolist():
        in_golden, in_candidate = golden == class_id, candidate == class_id
        union = int(np.count_nonzero(in_golden | in_candidate))
        results.append(
            ClassIoU(
                class_id=int(class_id),
                iou=np.count_nonzero(in_golden & in_candidate) / union,
                golden_pixels=int(np.count_nonzero(in_golden)),
                candidate_pixels=int(np.count_nonzero(in_candidate)),
            )
        )
    return results


MAX_DRAWN_SAMPLES = 8
"""Samples whose label maps a comparison keeps for the report: those that disagree most."""


def compare_segmentation(
    spec: SegmentationTask, golden: np.ndarray, candidate: np.ndarray
) -> SegmentationComparison:
    """Pixel agreement and mean class IoU per image; the aggregates are the worst image's. The
    label maps of the (at most `MAX_DRAWN_SAMPLES`) images that disagree most are kept for the
    report's pictures; they play no part in the verdict."""
    what = f"segmentation output {spec.output!r}"
    golden_scores = class_last(golden, spec.class_axis, what)
    candidate_scores = class_last(candidate, spec.class_axis, what)
    pairs = zip(split_images(golden_scores, 3, what), split_images(candidate_scores, 3, what), strict=True)
    compared = [_compare_image(spec, where, gold, cand) for (where, gold), (_, cand) in pairs]
    disagreeing = sorted(
        (index for index, (sample, _, _) in enumerate(compared) if sample.pixel_agreement < 1.0),
        key=lambda index: compared[index][0].pixel_agreement,
    )[:MAX_DRAWN_SAMPLES]
    samples = [sample for sample, _, _ in compared]
    for index in disagreeing:
        sample, gold, cand = compared[index]
        samples[index] = sample.model_copy(
            update={"golden_labels": encode_labels(gold), "candidate_labels": encode_labels(cand)}
        )
    return SegmentationComparison(
        samples=samples,
        pixel_agreement=min(s.pixel_agreement for s in samples),
        mean_iou=min(s.mean_iou for s in samples),
    )


def _compare_image(
    spec: SegmentationTask, where: SampleRef, golden: np.ndarray, candidate: np.ndarray
) -> tuple[SegmentationSample, np.ndarray, np.ndarray]:
    golden_labels, candidate_labels = label_map(spec, golden), label_map(spec, candidate)
    classes = class_iou(golden_labels, candidate_labels)
    sample = SegmentationSample(
        where=where,
        pixel_agreement=float(np.mean(golden_labels == candidate_labels)),
        mean_iou=float(np.mean([c.iou for c in classes])),
        classes=classes,
    )
    return sample, golden_labels, candidate_labels


def encode_labels(labels: np.ndarray) -> LabelMap:
    """A label map as the report draws it: every `stride`-th pixel of a map larger than
    `LabelMap.MAX_SIDE` a side, one byte a pixel (classes above 255 saturate)."""
    stride = max(1, -(-max(labels.shape) // LabelMap.MAX_SIDE))
    kept = np.clip(labels[::stride, ::stride], 0, 255).astype(np.uint8)
    data = base64.b64encode(zlib.compress(np.ascontiguousarray(kept).tobytes(), 9)).decode("ascii")
    return LabelMap(height=kept.shape[0], width=kept.shape[1], stride=stride, data=data)


class Segmentation:
    """The `segmentation` kind (see `baseline.tasks.kinds`)."""

    def title(self, spec: SegmentationTask) -> str:
        return f"segmentation on {spec.output!r}"

    def compare(
        self, spec: SegmentationTask, golden: Outputs, candidate: Outputs, context: TaskContext
    ) -> tuple[SegmentationComparison, list[str]]:
        comparison = compare_segmentation(
            spec, np.asarray(golden[spec.output]), np.asarray(candidate[spec.output])
        )
        return comparison, segmentation_failures(spec, comparison)

    def headline(self, comparison: SegmentationComparison) -> str:
        return (
            f"pixel agreement {comparison.pixel_agreement:.4f}, "
            f"mean IoU {comparison.mean_iou:.3f} (worst) {samples_counted(comparison)}"
        )

    def worst(self, comparison: SegmentationComparison) -> dict[str, float]:
        return {"min_pixel_agreement": comparison.pixel_agreement, "min_mean_iou": comparison.mean_iou}

    def changed(self, comparison: SegmentationComparison, names: list[str]) -> ChangedRows:
        rows = [
            (
                s.where.label,
                f"{s.pixel_agreement:.4f}",
                f"{s.mean_iou:.3f}",
                "; ".join(
                    f"{class_label(c.class_id, names)} IoU {c.iou:.3f} "
                    f"({c.golden_pixels} → {c.candidate_pixels} px)"
                    for c in sorted(s.classes, key=lambda c: c.iou)[:3]
                    if c.iou < 1.0
                ),
            )
            for s in sorted(comparison.samples, key=lambda s: s.pixel_agreement)
            if s.pixel_agreement < 1.0
        ]
        return ChangedRows(
            ("sample", "pixel agreement", "mean IoU", "worst classes (golden → candidate)"), rows
        )

    def class_names(self, spec: SegmentationTask) -> list[str]:
        return spec.class_names


KIND = Segmentation()
