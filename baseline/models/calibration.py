"""Tolerances from measurement: what `baseline lock` proposes when its own baseline fails its
gates, and what `baseline lock --calibrate` measured to propose them (kept in the lock as
provenance; the rules themselves stay in the intent, where review sees them)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from baseline.models.base import Name, Record
from baseline.models.task_golden import TaskTable

ToleranceTable = Literal["consistency", "consistency_quantized"]


class ToleranceProposal(Record):
    """One intent value that would make the measured numbers pass (or, calibrated, keep a margin)."""

    model: Name
    key: str
    """The output or part (`out:part`) the value is for."""
    table: ToleranceTable
    field: Literal["min_cosine", "max_mismatch_ratio"]
    value: float
    current: float
    measured: float
    where: str
    """`rknn-sim/rk3588`, ...: the run the measurement came from (the worst one, calibrated)."""

    @property
    def intent_key(self) -> str:
        return f'[models.tolerances.outputs."{self.key}".{self.table}]'

    def line(self) -> str:
        return (
            f"set {self.intent_key} {self.field} = {self.value:g} for model {self.model} "
            f"(measured {self.measured:.6g} on {self.where}; now {self.current:g})"
        )


class TaskThresholdProposal(Record):
    """One `[[models.tasks]]` threshold and the value that the measured task comparison meets."""

    model: Name
    task: int
    """Index of the task in the model's `[[models.tasks]]`, from 0."""
    kind: str
    output: str
    table: TaskTable = "task"
    """`task`: the task's own thresholds (against the locked outputs); `golden` /
    `golden_quantized`: its override against onnxruntime for float / quantized builds."""
    field: str
    """The threshold's key: `min_mean_iou`, `max_cer`, `require_equal_text` (1 true, 0 false), ..."""
    value: float
    current: float
    measured: float
    where: str
    refused: str | None = None
    """Why no value is proposed: the measurement is a broken behaviour, not a spread."""

    @property
    def intent_key(self) -> str:
        return task_key(self.task, self.kind, self.output, self.table)

    def line(self) -> str:
        if self.refused:
            return (
                f"no value proposed for {self.field} in {self.intent_key} for model {self.model}: "
                f"{self.refused}, measured on {self.where}; fix the build, or declare it in "
                "[[models.expect_fail]]"
            )
        return (
            f"set {self.field} = {threshold_text(self.field, self.value)} in {self.intent_key} "
            f"for model {self.model} (measured {self.measured:.6g} on {self.where}; "
            f"now {threshold_text(self.field, self.current)})"
        )


def task_key(task: int, kind: str, output: str, table: TaskTable) -> str:
    """Where a task threshold is set: `[[models.tasks]] #0 (ctc on 'x')`, or that task's
    `[models.tasks.golden_quantized]` table."""
    own = f"[[models.tasks]] #{task} ({kind} on {output!r})"
    return own if table == "task" else f"[models.tasks.{table}] of {own}"


def threshold_text(field: str, value: float) -> str:
    """As the intent spells it: `require_equal_text` is a boolean, the rest are numbers."""
    if field == "require_equal_text":
        return "true" if value else "false"
    return f"{value:g}"


class CalibrationEntry(Record):
    """The worst agreement of one output or part with the golden over every calibration run."""

    model: Name
    key: str
    table: ToleranceTable
    where: str
    onnx_sha256: str
    cosine: float | None
    """Lowest cosine over runs (over the part's channels too, where they are judged)."""
    mismatch_ratio: float
    """Highest fraction beyond the intent's atol + rtol·|golden| over runs."""
    max_abs: float | None
    proposed_min_cosine: float
    proposed_max_mismatch_ratio: float
    refused: str | None = None
    """Why no lower cosine is proposed: the measurement is a broken build, not a spread."""


class TaskThresholdEntry(Record):
    """The worst value of one task threshold's quantity over every calibration run."""

    model: Name
    task: int
    kind: str
    output: str
    table: TaskTable = "task"
    """Which thresholds the comparison was judged with (see `TaskThresholdProposal.table`)."""
    field: str
    where: str
    """The run and the comparison (`rknn-sim/rk3588 against onnxruntime today`) of the worst value."""
    measured: float
    current: float
    """The intent's threshold when calibrated."""
    proposed: float
    """The intent's value when the measurement with headroom meets it, else the headroom value."""
    refused: str | None = None
    """Why the headroom value is not proposed: the measurement is a broken behaviour, not a spread."""


class Calibration(Record):
    """Provenance of proposed tolerances: how they were measured."""

    runs: int
    """Independent lock measurements (each reconverts the model for every target)."""
    samples: dict[str, int]
    """Fixture samples per model."""
    margin: float
    """Proposed = measured with this factor of headroom on (1 - cosine) and on the mismatch ratio."""
    entries: list[CalibrationEntry] = []
    tasks: list[TaskThresholdEntry] = []
    """Task thresholds: the worst measured over runs and samples, and the proposal."""


MEASURED_COSINE_FLOOR = 0.9
"""Below this a cosine is a broken build, not a spread (measured: YOLOv8n's w8a8 class scores,
quantized to zero beside pixel-sized boxes, cosine 0.0): nothing measured may pin a lower one."""
MEASURED_DRIFT_FLOOR = 0.1
"""A statistic's measured noise above this fraction of its output's locked range is not noise."""


class MeasuredLimit(Record):
    """One limit `baseline lock` measured an output (or part) to need beyond the intent's value:
    what two conversions and simulator runs of the unchanged model spread over, with headroom."""

    key: str
    """The output or part (`out:part`) it applies to."""
    table: Literal["consistency", "consistency_quantized", "drift"]
    min_cosine: float | None = Field(default=None, ge=MEASURED_COSINE_FLOOR, le=1)
    max_mismatch_ratio: float | None = Field(default=None, ge=0, le=1)
    drift_atol: float | None = Field(default=None, ge=0)
    measured: str
    """What was measured, in words: `cosine 0.999664, 0.39% beyond tolerance on rknn-sim/rk3588`."""

    def line(self) -> str:
        values = [
            f"{name} = {value:g}"
            for name, value in (
                ("min_cosine", self.min_cosine),
                ("max_mismatch_ratio", self.max_mismatch_ratio),
                ("atol", self.drift_atol),
            )
            if value is not None
        ]
        return f"{self.key!r} {self.table}: {', '.join(values)} ({self.measured})"


class MeasuredTaskLimit(Record):
    """One `[[models.tasks]]` threshold `baseline lock` measured the unchanged model to need: the
    worst of two runs against the locked outputs (`task`) or onnxruntime (a golden table)."""

    task: int = Field(ge=0)
    """Index of the task in the model's `[[models.tasks]]`, from 0."""
    table: TaskTable
    field: str
    value: float
    measured: str
    """What was measured, in words: `min_mean_iou 0.8182 on rknn-sim/rk3588 against onnxruntime today`."""

    def line(self) -> str:
        where = f"[[models.tasks]] #{self.task}" + ("" if self.table == "task" else f" [{self.table}]")
        return f"{where}: {self.field} = {threshold_text(self.field, self.value)} ({self.measured})"


class Measured(Record):
    """What `baseline lock` measured about one model to pin its limits (provenance and values)."""

    runs: int = Field(ge=2)
    """Conversions and backend runs of each target, nothing changed in between."""
    margin: float = Field(ge=1, le=4)
    """Headroom on the worst spread: (1 - cosine), the mismatch ratio and drift are multiplied by it."""
    fixtures_sha256: str
    onnx_sha256: str
    limits: list[MeasuredLimit] = []
    varying_fingerprints: list[str] = []
    """Targets whose two conversions gave different `.rknn` fingerprints: judged by I/O contract
    and outputs (the artifact gate says so)."""
    tasks: list[MeasuredTaskLimit] = []

    def lines(self) -> list[str]:
        """For review, one line per pinned limit and per target without a fingerprint."""
        lines = [limit.line() for limit in self.limits] + [limit.line() for limit in self.tasks]
        lines += [
            f"{target}: two conversions gave different fingerprints; judged by I/O contract and outputs"
            for target in self.varying_fingerprints
        ]
        return lines
