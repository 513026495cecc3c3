"""Classification: same top-1, overlapping top-k, small probability changes.

Assumes one score vector per image along `class_axis`: probabilities, or logits when the
spec says `softmax = true`. Scores are not renormalised otherwise (a sigmoid multi-label
head is compared as it is).
"""

from __future__ import annotations

import numpy as np

from baseline.models.task import (
    ClassificationComparison,
    ClassificationSample,
    ClassificationTask,
    SampleRef,
)
from baseline.tasks.kinds import ChangedRows, Outputs, TaskContext, samples_counted
from baseline.tasks.samples import class_last, split_images
from baseline.tasks.verdicts import class_label, classification_failures


def softmax(logits: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, shifted by the maximum so large logits do not overflow."""
    shifted = logits - np.max(logits, axis=-1, keepdims=True)
    exponentials = np.exp(shifted)
    return np.asarray(exponentials / np.sum(exponentials, axis=-1, keepdims=True))


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the `k` highest scores, highest first; ties keep the lower index first."""
    return np.argsort(-scores, kind="stable")[:k]


def compare_classification(
    spec: ClassificationTask, golden: np.ndarray, candidate: np.ndarray
) -> ClassificationComparison:
    """Per-image agreement of the candidate's class scores with the golden ones."""
    what = f"classification output {spec.output!r}"
    golden_probs = _probabilities(spec, class_last(golden, spec.class_axis, what))
    candidate_probs = _probabilities(spec, class_last(candidate, spec.class_axis, what))
    pairs = zip(split_images(golden_probs, 1, what), split_images(candidate_probs, 1, what), strict=True)
    samples = [_compare_one(spec, where, gold, cand) for (where, gold), (_, cand) in pairs]
    return ClassificationComparison(
        samples=samples,
        top1_agreement=float(np.mean([s.golden_top1 == s.candidate_top1 for s in samples])),
        topk_agreement=float(np.mean([s.topk_overlap for s in samples])),
        max_probability_change=max(s.max_probability_change for s in samples),
    )


def _probabilities(spec: ClassificationTask, scores: np.ndarray) -> np.ndarray:
    values = scores.astype(np.float64)
    return softmax(values) if spec.softmax else values


def _compare_one(
    spec: ClassificationTask, where: SampleRef, golden: np.ndarray, candidate: np.ndarray
) -> ClassificationSample:
    k = min(spec.top_k, golden.shape[-1])
    golden_top, candidate_top = top_k(golden, k), top_k(candidate, k)
    change = np.abs(np.nan_to_num(candidate - golden, nan=np.inf))
    worst = int(np.argmax(change))
    return ClassificationSample(
        where=where,
        golden_top1=int(golden_top[0]),
        candidate_top1=int(candidate_top[0]),
        golden_top1_probability=float(golden[golden_top[0]]),
        candidate_top1_probability=float(candidate[candidate_top[0]]),
        topk_overlap=len(set(golden_top.tolist()) & set(candidate_top.tolist())) / k,
        max_probability_change=float(change[worst]),
        max_change_class=worst,
        max_change_golden_probability=float(golden[worst]),
        max_change_candidate_probability=float(candidate[worst]),
    )


class Classification:
    """The `classification` kind (see `baseline.tasks.kinds`)."""

    def title(self, spec: ClassificationTask) -> str:
        return f"classification on {spec.output!r}"

    def compare(
        self, spec: ClassificationTask, golden: Outputs, candidate: Outputs, context: TaskContext
    ) -> tuple[ClassificationComparison, list[str]]:
        comparison = compare_classification(
            spec, np.asarray(golden[spec.output]), np.asarray(candidate[spec.output])
        )
        return comparison, classification_failures(spec, comparison)

    def headline(self, comparison: ClassificationComparison) -> str:
        return (
            f"top-1 agreement {comparison.top1_agreement:.2f}, "
            f"top-k agreement {comparison.topk_agreement:.2f}, "
            f"largest probability change {comparison.max_probability_change:.3f} "
            + samples_counted(comparison)
        )

    def worst(self, comparison: ClassificationComparison) -> dict[str, float]:
        return {
            "min_top1_agreement": comparison.top1_agreement,
            "min_topk_agreement": comparison.topk_agreement,
            "max_probability_change": comparison.max_probability_change,
        }

    def changed(self, comparison: ClassificationComparison, names: list[str]) -> ChangedRows:
        rows = [
            (
                s.where.label,
                f"{class_label(s.golden_top1, names)} (p {s.golden_top1_probability:.3f})",
                f"{class_label(s.candidate_top1, names)} (p {s.candidate_top1_probability:.3f})",
            )
            for s in comparison.samples
            if s.golden_top1 != s.candidate_top1
        ]
        return ChangedRows(("sample", "golden top-1", "candidate top-1"), rows)

    def class_names(self, spec: ClassificationTask) -> list[str]:
        return spec.class_names


KIND = Classification()
