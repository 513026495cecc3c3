"""Embeddings: one vector per sample, compared by direction and by what a gallery search returns.

A face-recognition or re-identification model is used by nearest neighbour: which enrolled
vector is closest. A build can keep every vector's cosine with the float one at 0.98 and still
swap two people whose vectors were close; so beside each sample's cosine the comparison asks,
for every sample, whether its nearest other sample is the same on both sides.
"""

from __future__ import annotations

import numpy as np

from baseline.errors import InputError
from baseline.models.task import EmbeddingComparison, EmbeddingSample, EmbeddingTask, SampleRef
from baseline.tasks.kinds import ChangedRows, Outputs, TaskContext, samples_counted


def vectors(array: np.ndarray, what: str) -> tuple[list[SampleRef], np.ndarray]:
    """`[samples, batch, ...]` (or `[samples, dim]`) as one row per vector, labelled."""
    if array.ndim < 2:
        raise InputError(f"{what}: expected [samples, (batch,) vector dims], got shape {list(array.shape)}")
    if array.ndim == 2:
        return [SampleRef(sample=i) for i in range(array.shape[0])], array.astype(np.float64)
    samples, batch = array.shape[:2]
    refs = [
        SampleRef(sample=i, batch=None if batch == 1 else b) for i in range(samples) for b in range(batch)
    ]
    return refs, array.reshape(samples * batch, -1).astype(np.float64)


def unit_rows(rows: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1; a zero or non-finite row becomes NaN (no direction to compare)."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        unit = rows / norms
    unit[~np.isfinite(norms[:, 0]) | (norms[:, 0] == 0)] = np.nan
    return np.asarray(unit)


def similarities(unit: np.ndarray) -> np.ndarray:
    """Cosine of every row with every other (the diagonal and rows without a direction: -inf)."""
    similarity = np.nan_to_num(unit @ unit.T, nan=-np.inf)
    np.fill_diagonal(similarity, -np.inf)
    return np.asarray(similarity)


def nearest_others(similarity: np.ndarray) -> list[int | None]:
    """Each row's most similar other row (None when it is alone or has no direction)."""
    best = np.argmax(similarity, axis=1) if len(similarity) > 1 else np.zeros(len(similarity), dtype=int)
    return [int(j) if np.isfinite(similarity[i, j]) else None for i, j in enumerate(best)]


def compare_embedding(spec: EmbeddingTask, golden: np.ndarray, candidate: np.ndarray) -> EmbeddingComparison:
    what = f"embedding output {spec.output!r}"
    refs, gold = vectors(golden, what)
    _, cand = vectors(candidate, what)
    gold_unit, cand_unit = unit_rows(gold), unit_rows(cand)
    cosines = np.sum(gold_unit * cand_unit, axis=1)
    gold_sim = similarities(gold_unit)
    gold_near, cand_near = nearest_others(gold_sim), nearest_others(similarities(cand_unit))
    samples = [
        EmbeddingSample(
            where=ref,
            cosine=float(cosines[i]),
            golden_neighbour=g,
            candidate_neighbour=c,
            neighbour_gap=_gap(gold_sim[i], g, c),
        )
        for i, (ref, g, c) in enumerate(zip(refs, gold_near, cand_near, strict=True))
    ]
    agreeing = sum(not moved(spec, s) for s in samples)
    finite = [s.cosine for s in samples if np.isfinite(s.cosine)]
    return EmbeddingComparison(
        samples=samples,
        min_cosine=min(finite) if len(finite) == len(samples) else float("nan"),
        neighbour_agreement=agreeing / len(samples) if samples else 1.0,
    )


def _gap(golden_row: np.ndarray, golden: int | None, candidate: int | None) -> float:
    if golden == candidate:
        return 0.0
    if golden is None or candidate is None:
        return float("inf")
    return float(golden_row[golden] - golden_row[candidate])


def moved(spec: EmbeddingTask, sample: EmbeddingSample) -> bool:
    """The sample's nearest neighbour changed, and not between two the golden side nearly tied."""
    return not sample.neighbour_gap <= spec.neighbour_margin  # an infinite gap (no direction) moved


def embedding_failures(spec: EmbeddingTask, comparison: EmbeddingComparison) -> list[str]:
    """One line per sample that moved too far or changed its nearest neighbour."""
    lines = [
        f"{s.where.label}: cosine {s.cosine:.4f} with the golden vector (at least {spec.min_cosine:.4f})"
        for s in comparison.samples
        if not s.cosine >= spec.min_cosine  # NaN fails too
    ]
    changed = [s for s in comparison.samples if moved(spec, s)]
    if changed and comparison.neighbour_agreement < spec.min_neighbour_agreement:
        lines += [
            f"{s.where.label}: nearest other sample is {s.candidate_neighbour}, the golden's is "
            f"{s.golden_neighbour}, nearer by {s.neighbour_gap:.3f} in cosine (neighbour agreement "
            f"{comparison.neighbour_agreement:.2f}, at least {spec.min_neighbour_agreement:.2f})"
            for s in changed
        ]
    return lines


class Embedding:
    """The `embedding` kind (see `baseline.tasks.kinds`)."""

    def title(self, spec: EmbeddingTask) -> str:
        return f"embedding on {spec.output!r}"

    def compare(
        self, spec: EmbeddingTask, golden: Outputs, candidate: Outputs, context: TaskContext
    ) -> tuple[EmbeddingComparison, list[str]]:
        comparison = compare_embedding(
            spec, np.asarray(golden[spec.output]), np.asarray(candidate[spec.output])
        )
        return comparison, embedding_failures(spec, comparison)

    def headline(self, comparison: EmbeddingComparison) -> str:
        return (
            f"min cosine {comparison.min_cosine:.4f}, nearest-neighbour agreement "
            f"{comparison.neighbour_agreement:.2f} {samples_counted(comparison)}"
        )

    def worst(self, comparison: EmbeddingComparison) -> dict[str, float]:
        return {
            "min_cosine": comparison.min_cosine,
            "min_neighbour_agreement": comparison.neighbour_agreement,
        }

    def changed(self, comparison: EmbeddingComparison, names: list[str]) -> ChangedRows:
        rows = [
            (s.where.label, f"{s.cosine:.4f}", str(s.golden_neighbour), str(s.candidate_neighbour))
            for s in sorted(comparison.samples, key=lambda s: s.cosine)
            if s.golden_neighbour != s.candidate_neighbour or not s.cosine >= 0.9999
        ]
        return ChangedRows(("sample", "cosine", "golden nearest", "candidate nearest"), rows)

    def class_names(self, spec: EmbeddingTask) -> list[str]:
        return []


KIND = Embedding()
