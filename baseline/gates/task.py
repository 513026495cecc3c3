"""Task gate: does the model still do its job — same classes, same detections, same text?

Whole-tensor numbers hide what a team signs off on: a score change on a few anchors that
turns one detection into eight moves a YOLO output's cosine by nothing. This gate decodes
the outputs as the intent's `tasks` say (classification, detection, segmentation, CTC; see
`baseline.tasks`) and compares the decoded results:

- every backend's run today against its own locked outputs: the model still behaves as it
  did when the baseline was taken (a changed model, an upgraded toolkit);
- the simulator's or a board's run against onnxruntime's today: the NPU build behaves as the
  float model does.

The two are judged with different thresholds (see `baseline.models.task_golden`): the task's
own against the locked outputs, which for an unchanged model differ by reconversion noise only,
so they stay strict; against onnxruntime, the task's `golden` (float builds) or
`golden_quantized` overrides, which may absorb quantization's spread without loosening the
check that catches a regression since sign-off.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from baseline.backends import GOLDEN
from baseline.gates import advice
from baseline.gates.contract import GateInputs, GateJob, Reads, judgeable_outputs, reference_key
from baseline.models.base import Record
from baseline.models.lock import ModelLock
from baseline.models.results import GateMetrics, GateResult, Headline, place_label
from baseline.models.task import TaskOutcome
from baseline.models.task_golden import TaskTable, golden_table

if TYPE_CHECKING:  # numpy: only when outputs are really decoded
    from baseline.files.tensors import TensorSet

NAME = "task"


class TaskCheck(Record):
    """One task judged against one reference."""

    against: str
    """`locked onnxruntime`, `locked rknn-sim/rk3588`, or `onnxruntime today`."""
    outcome: TaskOutcome
    table: TaskTable = "task"
    """Whose thresholds judged it: the task's own (against locked outputs) or a golden override."""


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
    files = {reference_key(job.backend, job.target), advice.ONNX_KEY}  # the ONNX pin: see `_hint`
    return Reads(files=frozenset(files), runs=frozenset(runs))


def check(job: GateJob, inputs: GateInputs) -> GateResult:
    assert job.backend is not None
    outputs = judgeable_outputs(inputs, job.backend, job.target)
    if isinstance(outputs, GateResult):
        return outputs
    root = inputs.project_root
    metrics = TaskMetrics(checks=_judge(inputs.model, outputs, _references(job, inputs), root))
    tasks = len(inputs.model.tasks)
    if not metrics.failed:
        against = " and ".join(dict.fromkeys(check.against for check in metrics.checks))
        return inputs.result(metrics, summary=f"{tasks} task(s) unchanged against {against}")
    details = [f"against {c.against}: {line}" for c in metrics.failed for line in c.outcome.failures]
    first = metrics.failed[0]
    # the first failure line names the sample, the class and the numbers; the outcome's own
    # summary only pools them
    said = first.outcome.failures[0] if first.outcome.failures else first.outcome.summary
    return inputs.failed(
        f"{len(metrics.failed)} task comparison(s) failed; first, against {first.against}: {said}",
        details=[*details, *(f"against {c.against}: {c.outcome.summary}" for c in metrics.failed)],
        hint=_hint(first, inputs),
        metrics=metrics,
    )


def _hint(check: TaskCheck, inputs: GateInputs) -> str:
    """The intent key that holds the thresholds the first failure was judged with; against the
    locked outputs of a model whose file changed, accept or revert the change instead."""
    if check.table == "task" and advice.model_changed(inputs):
        return advice.changed_model(inputs.model)
    if check.table == "task":
        return (
            "if the new behaviour is intended, run `baseline lock`; the thresholds against the locked "
            "outputs are the task's own in [[models.tasks]] (loosen them only for reconversion noise)"
        )
    return (
        f"the build differs from onnxruntime beyond its thresholds; if that spread is accepted, set "
        f"them in the task's [models.tasks.{check.table}] (against onnxruntime only)"
    )


Reference = tuple[str, "TensorSet | None", TaskTable]
"""What a run is compared with: its label, its outputs, and whose thresholds judge it."""


def _references(job: GateJob, inputs: GateInputs) -> list[Reference]:
    assert job.backend is not None
    locked = inputs.tensors(reference_key(job.backend, job.target))
    references: list[Reference] = [(f"locked {place_label(job.backend, job.target)}", locked, "task")]
    if job.backend != GOLDEN:
        table = golden_table(inputs.model.quantized(job.target))
        references.append((f"{GOLDEN} today", inputs.run(GOLDEN, None).outputs, table))
    return references


def _judge(model: ModelLock, outputs: TensorSet, references: list[Reference], root: Path) -> list[TaskCheck]:
    from baseline.tasks import compare_task  # numpy: only when outputs are really decoded

    return [
        TaskCheck(
            against=against,
            outcome=compare_task(
                model.task_thresholds(index, table), reference, outputs, root=root, model=model.name
            ),
            table=table,
        )
        for against, reference, table in references
        if reference is not None  # onnxruntime failing today is the consistency gate's report
        for index in range(len(model.tasks))
    ]
