"""CTC recognisers: greedy decoding and character error rate.

Assumes `[(N,) T, C]` per-time-step class scores (probabilities or logits: greedy decoding
only needs the argmax) with the classes on `class_axis`. Decoding is greedy (best path):
argmax per step, repeated classes collapsed, blanks dropped, as PP-OCR and CRNN do by
default; beam search and language models are out of scope.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from baseline.files.alphabet import read_alphabet
from baseline.models.task import CtcComparison, CtcSample, CtcTask, SampleRef
from baseline.project.paths import resolve_in_project
from baseline.tasks.kinds import ChangedRows, Outputs, TaskContext
from baseline.tasks.samples import class_last, split_images
from baseline.tasks.verdicts import ctc_failures


def greedy_decode(scores: np.ndarray, blank: int) -> list[int]:
    """Class indices of the best path of `[T, C]` scores: repeats collapsed, then blanks removed."""
    best = np.argmax(np.nan_to_num(scores, nan=-np.inf), axis=-1)
    if best.size == 0:
        return []
    keep = np.concatenate([[True], best[1:] != best[:-1]]) & (best != blank)
    return [int(index) for index in best[keep]]


def edit_distance(first: Sequence[int], second: Sequence[int]) -> int:
    """Levenshtein distance (insertions, deletions, substitutions all cost 1), one row at a time."""
    previous = list(range(len(second) + 1))
    for row, item in enumerate(first, start=1):
        current = [row]
        for column, other in enumerate(second, start=1):
            current.append(
                min(previous[column] + 1, current[column - 1] + 1, previous[column - 1] + (item != other))
            )
        previous = current
    return previous[-1]


def character_error_rate(golden: Sequence[int], candidate: Sequence[int]) -> float:
    """Edit distance over the golden length; an empty golden gives 0 if the candidate is empty too, else 1."""
    if not golden:
        return 0.0 if not candidate else 1.0
    return edit_distance(golden, candidate) / len(golden)


def render_text(indices: Sequence[int], alphabet: Sequence[str] | None, blank: int) -> str:
    """Indices as text through the alphabet (class `i` is `alphabet[i - 1]` when `blank` is 0);
    indices outside it, or every index without an alphabet, show as `⟨i⟩`."""
    symbols = []
    for index in indices:
        position = index - 1 if index > blank else index
        known = alphabet is not None and 0 <= position < len(alphabet)
        symbols.append(alphabet[position] if alphabet is not None and known else f"⟨{index}⟩")
    return "".join(symbols)


def compare_ctc(
    spec: CtcTask, golden: np.ndarray, candidate: np.ndarray, alphabet: Sequence[str] | None = None
) -> CtcComparison:
    """Decoded text and character error rate per image.

    `alphabet` (a loaded `alphabet_file`) takes precedence over `spec.alphabet`; the space class
    follows either when `spec.space_char` is set.
    """
    what = f"ctc output {spec.output!r}"
    symbols = spec.symbols(list(alphabet) if alphabet is not None else None)
    golden_scores = class_last(golden, spec.class_axis, what)
    candidate_scores = class_last(candidate, spec.class_axis, what)
    pairs = zip(split_images(golden_scores, 2, what), split_images(candidate_scores, 2, what), strict=True)
    samples = [_compare_line(spec, symbols, where, gold, cand) for (where, gold), (_, cand) in pairs]
    return CtcComparison(
        samples=samples,
        equal_texts=sum(s.edit_distance == 0 for s in samples),
        max_cer=max(s.cer for s in samples),
        mean_cer=float(np.mean([s.cer for s in samples])),
    )


def _compare_line(
    spec: CtcTask, alphabet: Sequence[str] | None, where: SampleRef, golden: np.ndarray, candidate: np.ndarray
) -> CtcSample:
    golden_indices = greedy_decode(golden, spec.blank)
    candidate_indices = greedy_decode(candidate, spec.blank)
    return CtcSample(
        where=where,
        golden_text=render_text(golden_indices, alphabet, spec.blank),
        candidate_text=render_text(candidate_indices, alphabet, spec.blank),
        edit_distance=edit_distance(golden_indices, candidate_indices),
        cer=character_error_rate(golden_indices, candidate_indices),
    )


def _alphabet_file(written: str, context: TaskContext) -> list[str]:
    """The task's `alphabet_file`, read as the lock reads it: inside the project when the
    comparison knows its root (refused if it leaves it), else as written."""
    where = "ctc alphabet_file"
    path = (
        Path(written) if context.root is None else resolve_in_project(context.root, written, where, file=True)
    )
    return read_alphabet(path, where)


class Ctc:
    """The `ctc` kind (see `baseline.tasks.kinds`)."""

    def title(self, spec: CtcTask) -> str:
        return f"ctc on {spec.output!r}"

    def compare(
        self, spec: CtcTask, golden: Outputs, candidate: Outputs, context: TaskContext
    ) -> tuple[CtcComparison, list[str]]:
        alphabet = spec.alphabet
        if spec.alphabet_file is not None:  # a task not locked yet (the lock pins the symbols)
            alphabet = _alphabet_file(spec.alphabet_file, context)
        gold, cand = np.asarray(golden[spec.output]), np.asarray(candidate[spec.output])
        comparison = compare_ctc(spec, gold, cand, alphabet=alphabet)
        return comparison, ctc_failures(spec, comparison)

    def headline(self, comparison: CtcComparison) -> str:
        return (
            f"{comparison.equal_texts} of {len(comparison.samples)} texts equal, "
            f"CER max {comparison.max_cer:.3f}, mean {comparison.mean_cer:.3f}"
        )

    def worst(self, comparison: CtcComparison) -> dict[str, float]:
        changed = len(comparison.samples) - comparison.equal_texts
        return {"max_cer": comparison.max_cer, "require_equal_text": 0.0 if changed else 1.0}

    def changed(self, comparison: CtcComparison, names: list[str]) -> ChangedRows:
        rows = [
            (s.where.label, s.golden_text, s.candidate_text, f"{s.cer:.3f}")
            for s in comparison.samples
            if s.golden_text != s.candidate_text
        ]
        return ChangedRows(("sample", "golden text", "candidate text", "CER"), rows)

    def class_names(self, spec: CtcTask) -> list[str]:
        return []


KIND = Ctc()
