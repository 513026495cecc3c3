"""Task thresholds from measurement: what `lock` proposes for `[[models.tasks]]` and what
`lock --calibrate` measured.

The `task` gate's thresholds (recall, precision, mean IoU, top-1 agreement, CER, ...) are a
team's behavioural contract, so calibration never tightens them: it proposes a value only where
the measured worst (with headroom) does not meet the intent's, and records the measured worst
of every threshold as provenance. A proposal to pass is the measured value itself, rounded
towards passing (a lower bound down, an upper bound up), so it passes by construction.

A measurement loosens only the thresholds that judged it: a build against its own locked outputs
(reconversion spread) the task's own; against onnxruntime, the task's `golden` override (float
builds) or `golden_quantized` (quantized ones). So a w8a8 build's distance from the float model
never loosens the check that catches a regression since sign-off.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from baseline.gates.task import TaskMetrics
from baseline.models.calibration import TaskThresholdEntry, TaskThresholdProposal
from baseline.models.lock import Lock
from baseline.models.results import GateResult, Status, place_label
from baseline.models.task import (
    TaskComparison,
    TaskSpec,
)
from baseline.models.task_golden import (
    BROKEN_ABOVE,
    BROKEN_BEYOND,
    TaskTable,
    broken,
    lower_bound,
    reach_at_least,
    thresholds_of,
)
from baseline.tasks.kinds import kind_of

DIGITS = 4
"""Proposed fractions keep four decimals: 0.83217 → 0.8321 for a lower bound."""


@dataclass(frozen=True)
class Measured:
    """The worst value of one threshold's quantity in one task comparison."""

    model: str
    task: int
    table: TaskTable
    """Whose thresholds judged the comparison: the task's own or a golden override."""
    field: str
    value: float
    where: str


def measured_values(lock: Lock, results: Iterable[GateResult]) -> list[Measured]:
    """Every task threshold's measured worst, per task result and comparison."""
    found = []
    for result in results:
        if result.gate != "task" or not isinstance(result.metrics, TaskMetrics):
            continue
        model = lock.model(result.model)
        assert model is not None
        where = place_label(result.backend, result.target)
        for check in result.metrics.checks:
            index = _task_index(model.tasks, check.outcome.kind, check.outcome.output)
            comparison = check.outcome.comparison
            if index is None or comparison is None:
                continue
            found += [
                Measured(result.model, index, check.table, field, value, f"{where} against {check.against}")
                for field, value in worst_of(comparison).items()
            ]
    return found


def _task_index(tasks: list[TaskSpec], kind: str, output: str) -> int | None:
    # a TaskCheck does not carry its index; (kind, output) names a task unless it is declared twice
    return next((i for i, task in enumerate(tasks) if task.kind == kind and task.output == output), None)


def worst_of(comparison: TaskComparison) -> dict[str, float]:
    """The value each threshold of this comparison's kind is judged on, at its worst sample."""
    return kind_of(comparison.kind).worst(comparison)


def _worst(measured: Iterable[Measured]) -> dict[tuple[str, int, str, str], Measured]:
    worst: dict[tuple[str, int, str, str], Measured] = {}
    for m in measured:
        key = (m.model, m.task, m.table, m.field)
        held = worst.get(key)
        if held is None or _is_worse(m.field, m.value, held.value):
            worst[key] = m
    return worst


def _is_worse(field: str, value: float, than: float) -> bool:
    return value < than if reach_at_least(field) else value > than


def current(lock: Lock, m: Measured) -> float:
    """The threshold in force for `m`: the task's own, or its golden override where one is set."""
    locked = lock.model(m.model)
    assert locked is not None
    return float(getattr(thresholds_of(locked.tasks[m.task], m.table), m.field))


def passing_value(field: str, measured: float, margin: float = 1.0) -> float:
    """The threshold that `measured` (with `margin` headroom on its distance from perfect) meets."""
    if lower_bound(field):
        return max(0.0, _floor(1 - (1 - measured) * margin))
    if field == "require_equal_text":
        return measured  # 0 (texts differ: equality cannot be required) or 1
    if field == "max_class_flips":
        return float(math.ceil(measured * margin))
    bound = 1.0 if field == "max_probability_change" else math.inf
    return min(bound, _ceil(measured * margin))


def _meets(field: str, value: float, threshold: float) -> bool:
    return value >= threshold if reach_at_least(field) else value <= threshold


@dataclass(frozen=True)
class Needed:
    """A task threshold the unchanged model's worst measurement does not meet with headroom."""

    measured: Measured
    current: float
    value: float
    """The threshold with headroom over the measurement, never past the floor that means broken."""
    refused: str | None
    """Why nothing is pinned: the measurement itself is a broken behaviour."""


def needed_thresholds(lock: Lock, results: Iterable[GateResult], margin: float) -> list[Needed]:
    """What `lock` pins for tasks (see `baseline.locker.remeasure`): per threshold whose worst measured
    value with `margin` headroom does not meet the value in force."""
    needed = []
    for m in _worst(measured_values(lock, results)).values():
        now = current(lock, m)
        headroom = passing_value(m.field, m.value, margin)
        if _meets(m.field, headroom, now):
            continue
        needed.append(Needed(m, now, _at_floor(m.field, headroom), broken(m.field, m.value)))
    return needed


def _at_floor(field: str, value: float) -> float:
    """Headroom stops at the floor that means broken (the measurement itself is above it)."""
    if lower_bound(field):
        return max(BROKEN_BEYOND, value)
    if field in BROKEN_ABOVE:
        return min(BROKEN_BEYOND, value)
    return value


def task_proposals_to_pass(lock: Lock, results: list[GateResult]) -> list[TaskThresholdProposal]:
    """For every failing task result: each broken threshold and the value that would pass."""
    failing = [r for r in results if r.gate == "task" and r.status == Status.FAIL]
    proposals = []
    for m in _worst(measured_values(lock, failing)).values():
        now = current(lock, m)
        if not _meets(m.field, m.value, now):
            value = passing_value(m.field, m.value)
            refused = broken(m.field, value)
            proposals.append(_proposal(lock, m, now if refused else value, now, refused))
    return proposals


def _proposal(
    lock: Lock, m: Measured, value: float, now: float, refused: str | None
) -> TaskThresholdProposal:
    return TaskThresholdProposal(**_named(lock, m), value=value, current=now, refused=refused)


def _named(lock: Lock, m: Measured) -> dict[str, Any]:
    """What a proposal and a calibration entry both say of a measured threshold: which model,
    task, table and field, where it was measured and what."""
    spec = _spec(lock, m)
    return {
        "model": m.model,
        "task": m.task,
        "kind": spec.kind,
        "output": spec.output,
        "table": m.table,
        "field": m.field,
        "where": m.where,
        "measured": m.value,
    }


def calibrate_tasks(lock: Lock, results: Iterable[GateResult], margin: float) -> list[TaskThresholdEntry]:
    """Per task threshold: the worst over every run, the intent's value, and the proposal — the
    intent's value when the measurement (with headroom) meets it, else the headroom value, never
    past the floor that means broken."""
    entries = []
    for m in _worst(measured_values(lock, results)).values():
        now = current(lock, m)
        headroom = passing_value(m.field, m.value, margin)
        meets = _meets(m.field, headroom, now)
        # refused for what was measured, never for the headroom on it (0.606 measured was refused
        # as "0.4092 is a broken behaviour"); headroom stops at the floor, as `lock` pins it
        refused = None if meets else broken(m.field, m.value)
        proposed = now if refused or meets else _at_floor(m.field, headroom)
        entries.append(TaskThresholdEntry(**_named(lock, m), current=now, proposed=proposed, refused=refused))
    return entries


def _spec(lock: Lock, m: Measured) -> TaskSpec:
    model = lock.model(m.model)
    assert model is not None
    return model.tasks[m.task]


# no rounding before floor/ceil: a float error may loosen the value by one last digit, never
# make it fail the measurement it came from
def _floor(value: float) -> float:
    scale = 10.0**DIGITS
    return math.floor(value * scale) / scale


def _ceil(value: float) -> float:
    scale = 10.0**DIGITS
    return math.ceil(value * scale) / scale
