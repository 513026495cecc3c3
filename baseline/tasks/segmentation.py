"""Segmentation: per-pixel labels must agree, class by class.

Assumes scores per pixel along `class_axis`: the label is the argmax over several
channels, or `value > threshold` for a single channel (a probability map such as
DBNet's text map, whose own post-processing binarises it at a threshold too).
Outputs are `[(N,) C, H, W]` or any order with `class_axis` set: two spatial dims.
"""

from __future__ import annotations

import numpy as np

from baseline.errors import InputError
from baseline.models.task import (
    ClassIoU,
    SampleRef,
    SegmentationComparison,
    SegmentationSample,
    SegmentationTask,
)
from baseline.tasks.samples import class_last, split_images


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


def compare_segmentation(
    spec: SegmentationTask, golden: np.ndarray, candidate: np.ndarray
) -> SegmentationComparison:
    """Pixel agreement and mean class IoU per image; the aggregates are the worst image's."""
    what = f"segmentation output {spec.output!r}"
    golden_scores = class_last(golden, spec.class_axis, what)
    candidate_scores = class_last(candidate, spec.class_axis, what)
    pairs = zip(split_images(golden_scores, 3, what), split_images(candidate_scores, 3, what), strict=True)
    samples = [_compare_image(spec, where, gold, cand) for (where, gold), (_, cand) in pairs]
    return SegmentationComparison(
        samples=samples,
        pixel_agreement=min(s.pixel_agreement for s in samples),
        mean_iou=min(s.mean_iou for s in samples),
    )


def _compare_image(
    spec: SegmentationTask, where: SampleRef, golden: np.ndarray, candidate: np.ndarray
) -> SegmentationSample:
    golden_labels, candidate_labels = label_map(spec, golden), label_map(spec, candidate)
    classes = class_iou(golden_labels, candidate_labels)
    return SegmentationSample(
        where=where,
        pixel_agreement=float(np.mean(golden_labels == candidate_labels)),
        mean_iou=float(np.mean([c.iou for c in classes])),
        classes=classes,
    )
