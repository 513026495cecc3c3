"""Task gate: does the model still do its job — same classes, same detections, same text?

Whole-tensor numbers hide what a team signs off on: a score change on a few anchors that
turns one detection into eight moves a YOLO output's cosine by nothing. This gate decodes
the outputs as the intent's `tasks` say (classification, detection, segmentation, CTC; see
`baseline.tasks`) and compares the decoded results:

- every backend's run today against its own locked outputs: the model still behaves as it
  did when the baseline was taken (a changed model, an upgraded toolkit);
- the simulator's or a board's run against onnxruntime's today: the NPU build behaves as the
  float model does.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from baseline.backends import GOLDEN
from baseline.gates.contract import GateInputs, GateJob, Reads, reference_key, unjudgeable
from baseline.models.base import Record
from baseline.models.lock import ModelLock
from baseline.models.results import GateMetrics, GateResult, Headline, Status, place_label
from baseline.models.task import TaskOutcome

if TYPE_CHECKING:  # numpy: only when outputs are really decoded
    from baseline.tensors import TensorSet

NAME = "task"


class TaskCheck(Record):
    """One task judged against one reference."""

    against: str
    """`locked onnxruntime`, `locked rknn-sim/rk3588`, or `onnxruntime today`."""
    outcome: TaskOutcome


class TaskMetrics(GateMetrics):
    gate = NAME

    checks: list[TaskCheck] = []

    @property
    def failed(self) -> list[TaskCheck]:
        return [check for check in self.checks if not check.outcome.passed]

    def headline(self) -> Headline:
        return Headline("failed task comparisons", float(len(self.failed)), 0.0, "≤")


def jobs(model: ModelLock) -> list[GateJob]:
    if not model.tasks:
        return []
    return [GateJob(NAME, backend=ref.backend, target=ref.target) for ref in model.references]


def reads(model: ModelLock, job: GateJob) -> Reads:
    """Today's run and its locked outputs; for an NPU backend also onnxruntime's run today."""
    assert job.backend is not None
    runs = {(job.backend, job.target)}
    if job.backend != GOLDEN:
        runs.add((GOLDEN, None))
    return Reads(files=frozenset({reference_key(job.backend, job.target)}), runs=frozenset(runs))


def check(job: GateJob, inputs: GateInputs) -> GateResult:
    assert job.backend is not None
    result = inputs.result()
    run = inputs.run(job.backend, job.target)
    unusable = unjudgeable(result, run)
    if unusable is not None:
        return unusable
    assert run.outputs is not None  # unjudgeable answered a run without outputs
    root = inputs.ctx.project.root
    metrics = TaskMetrics(checks=_judge(inputs.model, run.outputs, _references(job, inputs), root))
    tasks = len(inputs.model.tasks)
    if not metrics.failed:
        against = " and ".join(dict.fromkeys(check.against for check in metrics.checks))
        return result.model_copy(
            update={"metrics": metrics, "summary": f"{tasks} task(s) unchanged against {against}"}
        )
    details = [f"against {c.against}: {line}" for c in metrics.failed for line in c.outcome.failures]
    first = metrics.failed[0]
    # the first failure line names the sample, the class and the numbers; the outcome's own
    # summary only pools them
    said = first.outcome.failures[0] if first.outcome.failures else first.outcome.summary
    return result.model_copy(
        update={
            "status": Status.FAIL,
            "metrics": metrics,
            "details": [*details, *(f"against {c.against}: {c.outcome.summary}" for c in metrics.failed)],
            "summary": f"{len(metrics.failed)} task comparison(s) failed; "
            f"first, against {first.against}: {said}",
            "hint": "if the new behaviour is intended, run `baseline lock`; if the thresholds are "
            "too strict for this build, set them in the intent's [[models.tasks]]",
        }
    )


def _references(job: GateJob, inputs: GateInputs) -> list[tuple[str, TensorSet | None]]:
    assert job.backend is not None
    locked = inputs.tensors(reference_key(job.backend, job.target))
    references: list[tuple[str, TensorSet | None]] = [
        (f"locked {place_label(job.backend, job.target)}", locked)
    ]
    if job.backend != GOLDEN:
        references.append((f"{GOLDEN} today", inputs.run(GOLDEN, None).outputs))
    return references


def _judge(
    model: ModelLock, outputs: TensorSet, references: list[tuple[str, TensorSet | None]], root: Path
) -> list[TaskCheck]:
    from baseline.tasks import compare_task  # numpy: only when outputs are really decoded

    return [
        TaskCheck(
            against=against,
            outcome=compare_task(task, reference, outputs, root=root, model=model.name),
        )
        for against, reference in references
        if reference is not None  # onnxruntime failing today is the consistency gate's report
        for task in model.tasks
    ]
