"""Task kinds are registered objects: every kind the records admit has one, and the newest kind
(embedding) lives in its records and one module."""

from __future__ import annotations

import typing

import numpy as np
import pytest

from baseline.locker.task_thresholds import worst_of
from baseline.models.task import EmbeddingTask, TaskIntent, TaskSpec
from baseline.tasks import compare_task
from baseline.tasks.kinds import KINDS, kind_of


def spec_kinds() -> set[str]:
    union = typing.get_args(TaskSpec)[0]
    return {typing.get_args(spec.model_fields["kind"].annotation)[0] for spec in typing.get_args(union)}


def test_every_kind_the_records_admit_is_registered_with_a_whole_kind_object() -> None:
    assert spec_kinds() == set(KINDS)
    for name in KINDS:
        kind = kind_of(name)
        for method in ("title", "compare", "headline", "worst", "changed", "class_names"):
            assert callable(getattr(kind, method)), f"{name} lacks {method}"


def gallery(seed: int = 0, people: int = 6, dim: int = 128) -> np.ndarray:
    """Stacked `[samples, 1, dim]` vectors: distinct directions, as a face model's would be."""
    return np.random.default_rng(seed).standard_normal((people, 1, dim)).astype(np.float32)


def test_an_unchanged_or_slightly_noisy_embedding_passes() -> None:
    spec = EmbeddingTask(output="feat")
    golden = gallery()
    noisy = golden + np.random.default_rng(1).normal(0, 1e-3, golden.shape).astype(np.float32)
    outcome = compare_task(spec, {"feat": golden}, {"feat": noisy})
    assert outcome.passed, outcome.failures
    assert (
        outcome.summary
        == "embedding on 'feat': min cosine 1.0000, nearest-neighbour agreement 1.00 over 6 samples"
    )
    # unrelated vectors are all about equally far apart: noise flips a near tie, which is excused
    samples = outcome.comparison.samples
    flipped = [s for s in samples if s.golden_neighbour != s.candidate_neighbour]
    assert flipped and all(s.neighbour_gap < spec.neighbour_margin for s in flipped)


def test_two_people_swapped_fail_on_cosine_and_on_the_gallery_search() -> None:
    spec = EmbeddingTask(output="feat")
    golden = gallery()
    swapped = golden.copy()
    swapped[[1, 4]] = golden[[4, 1]]
    outcome = compare_task(spec, {"feat": golden}, {"feat": swapped})
    assert not outcome.passed
    assert any(line.startswith("sample 1: cosine") for line in outcome.failures)
    assert any(line.startswith("sample 4: cosine") for line in outcome.failures)
    assert worst_of(outcome.comparison)["min_cosine"] < 0.5


def test_a_neighbour_change_alone_fails_when_the_vectors_still_point_the_same_way() -> None:
    """Two people whose vectors were close swap their nearest neighbour: cosines stay high."""
    base = gallery(dim=8)
    base[2] = base[1] + 0.05  # samples 1 and 2 are each other's nearest
    moved = base.copy()
    moved[2] = base[3] + 0.05 * (base[2] - base[3])  # 2 now sits next to 3
    spec = EmbeddingTask(output="feat", min_cosine=0.0)
    outcome = compare_task(spec, {"feat": base}, {"feat": moved})
    assert not outcome.passed
    assert any("nearest other sample is 3, the golden's is 1" in line for line in outcome.failures)


def test_a_zero_vector_has_no_direction_and_fails() -> None:
    golden = gallery()
    candidate = golden.copy()
    candidate[0] = 0
    outcome = compare_task(EmbeddingTask(output="feat"), {"feat": golden}, {"feat": candidate})
    assert not outcome.passed
    assert outcome.failures[0].startswith("sample 0: cosine nan")


def test_vectors_with_trailing_unit_dims_are_flattened_and_batches_are_labelled() -> None:
    golden = np.random.default_rng(2).standard_normal((2, 3, 16, 1, 1))
    outcome = compare_task(EmbeddingTask(output="feat"), {"feat": golden}, {"feat": golden})
    assert outcome.passed
    assert [s.where.label for s in outcome.comparison.samples][:2] == [
        "sample 0, batch 0",
        "sample 0, batch 1",
    ]


def test_the_intent_takes_an_embedding_task_with_golden_overrides() -> None:
    intent = TaskIntent.model_validate(
        {"tasks": [{"kind": "embedding", "output": "feat", "golden_quantized": {"min_cosine": 0.95}}]}
    )
    task = intent.tasks[0]
    assert isinstance(task, EmbeddingTask) and task.golden_quantized is not None
    with pytest.raises(ValueError):
        TaskIntent.model_validate({"tasks": [{"kind": "embedding", "output": "feat", "min_cosine": 1.5}]})
