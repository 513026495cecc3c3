"""Task kinds, registered like gates and backends: a new kind is its records in
`baseline.models.task` and one module here with its `KIND` object, plus a line in `KINDS`.

Everything that differs by kind goes through the kind object: how golden and candidate outputs
are compared and judged, the headline numbers, the values each threshold is measured on, the
rows a report shows of what changed, and the class names. The modules are imported on first use:
`baseline.tasks.locking`, which every verify reads, never pays for numpy.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    import numpy as np

    from baseline.models.task import TaskComparison

KINDS = {
    "classification": "baseline.tasks.classification",
    "detection": "baseline.tasks.detection",
    "segmentation": "baseline.tasks.segmentation",
    "ctc": "baseline.tasks.ctc",
    "embedding": "baseline.tasks.embedding",
    "postprocess": "baseline.tasks.team",
}
"""Each kind's module, holding its `KIND`; the key is the records' `kind` literal."""

SpecT = TypeVar("SpecT", contravariant=True)
ComparisonT = TypeVar("ComparisonT")
Outputs = Mapping[str, "np.ndarray"]


@dataclass(frozen=True)
class TaskContext:
    """Where a comparison runs: the project root (a CTC alphabet file, a team's module) and the
    model's name (for the team code's messages)."""

    root: Path | None = None
    model: str = ""


@dataclass(frozen=True)
class ChangedRows:
    """What a report tabulates of a failed comparison: one row per sample that changed."""

    headers: tuple[str, ...]
    rows: Sequence[tuple[str, ...]]


class TaskKind(Protocol[SpecT, ComparisonT]):
    def title(self, spec: SpecT) -> str:
        """How a summary names the task: `classification on 'logits'`."""
        ...

    def compare(
        self, spec: SpecT, golden: Outputs, candidate: Outputs, context: TaskContext
    ) -> tuple[ComparisonT, list[str]]:
        """The comparison and its failure lines. The outputs the spec reads are present in both,
        with the same shapes (`compare_task` checked)."""
        ...

    def headline(self, comparison: ComparisonT) -> str:
        """The aggregate numbers in one line."""
        ...

    def worst(self, comparison: ComparisonT) -> dict[str, float]:
        """The value each threshold of the kind is judged on, at its worst sample (what `lock`
        proposes thresholds from)."""
        ...

    def changed(self, comparison: ComparisonT, names: list[str]) -> ChangedRows:
        """The samples that changed, golden beside candidate; `names` are the class names."""
        ...

    def class_names(self, spec: SpecT) -> list[str]: ...


def samples_counted(comparison: TaskComparison) -> str:
    """`over 3 samples`: the tail of every kind's headline."""
    return f"over {len(comparison.samples)} sample{'s' if len(comparison.samples) != 1 else ''}"


def kind_of(name: str) -> TaskKind[Any, Any]:
    """The registered kind named `name` (a records' `kind` literal, so always known)."""
    kind: TaskKind[Any, Any] = importlib.import_module(KINDS[name]).KIND
    return kind
