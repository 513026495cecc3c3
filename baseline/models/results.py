"""Gate results and the verification report: numbers first, rendering elsewhere."""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict


class Status(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"
    """The gate could not run (for example the toolkit crashed); counts as not passed."""
    XFAIL = "xfail"
    """The gate failed as the intent file said it would."""

    @property
    def ok(self) -> bool:
        return self in (Status.PASS, Status.SKIP, Status.XFAIL)


class Diagnostic(BaseModel):
    """One toolkit log line, classified against the known patterns."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    level: str
    stage: str
    message: str
    rule: str
    severity: str
    """benign | warning | error | unknown-error | unknown-warning"""
    cause: str = ""
    remedy: str = ""

    def line(self) -> str:
        text = f"{self.level} {self.stage + ': ' if self.stage else ''}{self.message}"
        return f"{text} [{self.rule}]" if self.rule != "unknown" else f"{text} [unrecognised]"


class LayerError(BaseModel):
    """One row of the toolkit's accuracy analysis: simulator vs float, per layer.

    `entire` accumulates error from the model input; `single` feeds the layer the float
    inputs, so it isolates that layer's own error. NaN / Inf mean fp16 overflow.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    op: str
    name: str
    entire_cosine: float
    entire_euclidean: float
    single_cosine: float
    single_euclidean: float

    def line(self) -> str:
        return (
            f"[{self.op}] {self.name}: cosine {self.entire_cosine:.5f} accumulated, "
            f"{self.single_cosine:.5f} on its own"
        )


class GateResult(BaseModel):
    """The outcome of one gate for one model (and target, and backend)."""

    model_config = ConfigDict(extra="forbid")

    model: str
    gate: str
    status: Status
    summary: str
    target: str | None = None
    backend: str | None = None
    metrics: dict[str, Any] = {}
    details: list[str] = []
    """Lines that explain a failure: per-output numbers, mismatched files."""
    hint: str | None = None
    """What to do about a failure."""

    def __bool__(self) -> bool:
        return self.status.ok


class Report(BaseModel):
    """All gate results of one `baseline verify` run."""

    lock: str
    results: list[GateResult]

    @property
    def passed(self) -> bool:
        return all(self.results)

    def counts(self) -> dict[str, int]:
        counts = {status.value: 0 for status in Status}
        for result in self.results:
            counts[result.status.value] += 1
        return counts
