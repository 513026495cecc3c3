"""Labels gate: is the model still as *right* as when it was signed off?

The task gate says whether a build behaves as onnxruntime and as its locked self; it never says
how often either is right. For tasks that name ground truth (`[models.tasks.labels]`), this gate
scores every backend's run today against the labels — mAP@0.5 and mAP@0.5:0.95, mean IoU of
masks, top-1 / top-5, CER — and fails when a metric lost more than its `max_loss` against the
score of the locked outputs. The locked score is recomputed from the locked output tensors
(pinned by hash) and must equal the number the lock shows, so a lock edited to a lower score is
refused rather than trusted.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from baseline.errors import InputError
from baseline.gates import advice
from baseline.gates.contract import GateInputs, GateJob, Reads, judgeable_outputs, label_key, reference_key
from baseline.models.base import Record
from baseline.models.labels import (
    LOWER_IS_BETTER,
    METRIC_NAMES,
    LabelMetric,
    LabelScore,
    TaskLabels,
)
from baseline.models.lock import ModelLock
from baseline.models.results import GateMetrics, GateResult, Headline, place_label

if TYPE_CHECKING:
    from baseline.tasks.labels import Labels

NAME = "labels"
SAME = 1e-9
"""Locked scores are recomputed from the same tensors by the same code: equal up to rounding."""


class LabelCheck(Record):
    """One metric of one labelled task on one backend and target: locked, today, allowed loss."""

    task: int
    kind: str
    metric: LabelMetric
    locked: float
    now: float
    max_loss: float
    samples: int

    @property
    def loss(self) -> float:
        """How much worse today is than locked (negative: better)."""
        return self.now - self.locked if self.metric in LOWER_IS_BETTER else self.locked - self.now

    @property
    def passed(self) -> bool:
        return self.loss <= self.max_loss + SAME

    def text(self) -> str:
        name = METRIC_NAMES[self.metric]
        return (
            f"tasks[{self.task}] {name} {self.now:.3f} (locked {self.locked:.3f}, "
            f"loss {self.loss:+.3f}, allowed {self.max_loss:g}) over {self.samples} labelled sample(s)"
        )


class LabelMetrics(GateMetrics):
    gate = NAME

    checks: list[LabelCheck] = []

    @property
    def failed(self) -> list[LabelCheck]:
        return [check for check in self.checks if not check.passed]

    def headline(self) -> Headline | None:
        if not self.checks:
            return None
        worst = max(self.checks, key=lambda c: c.loss - c.max_loss)
        return Headline(f"{METRIC_NAMES[worst.metric]} loss", worst.loss, worst.max_loss, "≤")


def jobs(model: ModelLock) -> list[GateJob]:
    if not _labelled(model):
        return []
    return [GateJob(NAME, backend=ref.backend, target=ref.target) for ref in model.references]


def reads(model: ModelLock, job: GateJob) -> Reads:
    """Today's run, its locked outputs, the pixel fixtures (the input size), the label files and
    the ONNX pin (a changed model gets the advice to accept or revert it)."""
    assert job.backend is not None
    files = {reference_key(job.backend, job.target), "fixtures", advice.ONNX_KEY}  # the ONNX pin: `_hint`
    files |= {label_key(i) for i in _labelled(model)}
    return Reads(files=frozenset(files), runs=frozenset({(job.backend, job.target)}))


def _labelled(model: ModelLock) -> list[int]:
    return [i for i, task in enumerate(model.tasks) if isinstance(getattr(task, "labels", None), TaskLabels)]


def check(job: GateJob, inputs: GateInputs) -> GateResult:
    from baseline.tasks.labels import geometry_of, model_scores

    assert job.backend is not None
    outputs = judgeable_outputs(inputs, job.backend, job.target)
    if isinstance(outputs, GateResult):
        return outputs
    model = inputs.model
    labels = _labels(inputs)
    geometry = geometry_of(model, inputs.tensors("fixtures"))
    locked_outputs = inputs.tensors(reference_key(job.backend, job.target))
    locked = model_scores(model, labels, locked_outputs, geometry, job.backend, job.target)
    _check_pinned(model, locked)
    today = model_scores(model, labels, outputs, geometry, job.backend, job.target)
    metrics = LabelMetrics(
        checks=[c for was, now in zip(locked, today, strict=True) for c in _checks(model, was, now)]
    )
    hint = advice.changed_model(model) if advice.model_changed(inputs) else _hint(model, metrics)
    return _verdict(inputs, metrics, job, hint)


def _labels(inputs: GateInputs) -> dict[int, Labels]:
    from baseline.tasks.labels import locked_labels

    loaded = {}
    for index in _labelled(inputs.model):
        key = label_key(index)
        where = f"models.{inputs.model.name}.{key}"
        loaded[index] = locked_labels(inputs.model.tasks[index], inputs.path(key), where)
    return loaded


def _check_pinned(model: ModelLock, computed: list[LabelScore]) -> None:
    """The lock's scores are those of its locked outputs (a hand-lowered score is refused)."""
    for score in computed:
        pinned = next(
            (
                s
                for s in model.label_scores
                if (s.task, s.backend, s.target) == (score.task, score.backend, score.target)
            ),
            None,
        )
        differs = pinned is None or any(
            not math.isclose(pinned.metrics.get(metric, math.nan), value, abs_tol=SAME)
            for metric, value in score.metrics.items()
        )
        if differs:
            raise InputError(
                f"model {model.name!r}: the lock's label scores of tasks[{score.task}] on {score.where} "
                "are not those of its locked outputs; run `baseline lock`"
            )


def _checks(model: ModelLock, locked: LabelScore, now: LabelScore) -> list[LabelCheck]:
    task = model.tasks[locked.task]
    labels = getattr(task, "labels", None)
    assert isinstance(labels, TaskLabels)
    return [
        LabelCheck(
            task=locked.task,
            kind=task.kind,
            metric=metric,
            locked=value,
            now=now.metrics[metric],
            max_loss=labels.allowed_loss(metric),
            samples=now.samples,
        )
        for metric, value in locked.metrics.items()
    ]


def _hint(model: ModelLock, metrics: LabelMetrics) -> str:
    if not metrics.failed:
        return ""
    metric = metrics.failed[0].metric
    return (
        f"if the loss is accepted, raise max_loss.{metric} in [models.tasks.labels] of {model.name!r}; "
        "after an intended change, `baseline lock` takes today's score as the new baseline"
    )


def _verdict(inputs: GateInputs, metrics: LabelMetrics, job: GateJob, hint: str) -> GateResult:
    where = place_label(job.backend, job.target)
    numbers = "; ".join(
        ", ".join(f"{METRIC_NAMES[c.metric]} {c.now:.3f}" for c in metrics.checks if c.task == task)
        for task in dict.fromkeys(c.task for c in metrics.checks)
    )
    if not metrics.failed:
        return inputs.result(metrics, summary=f"accuracy against labels on {where}: {numbers}")
    first = metrics.failed[0]
    return inputs.failed(
        f"{len(metrics.failed)} metric(s) lost more than allowed against labels; first: {first.text()}",
        details=[check.text() for check in metrics.failed],
        hint=hint,
        metrics=metrics,
    )
