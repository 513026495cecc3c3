"""Gate results and the verification report: numbers first, rendering elsewhere."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar, get_args

from pydantic import BaseModel, ConfigDict, SerializeAsAny, field_validator, model_validator

from baseline.models.base import Record


class Keep(Enum):
    """`GateResult.but`'s default: leave the field as it is (None is a value: no hint)."""

    KEEP = "keep"


KEEP = Keep.KEEP


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

    @field_validator("entire_cosine", "entire_euclidean", "single_cosine", "single_euclidean", mode="before")
    @classmethod
    def _null_is_nan(cls, value: Any) -> Any:
        return null_is_nan(value)

    def line(self) -> str:
        return (
            f"[{self.op}] {self.name}: cosine {self.entire_cosine:.5f} accumulated, "
            f"{self.single_cosine:.5f} on its own"
        )


def null_is_nan(value: Any) -> Any:
    """JSON has no NaN: a JSON report writes it as null, and reading it back must not fail."""
    return math.nan if value is None else value


def place_label(backend: str | None, target: str | None) -> str:
    """`rknn-sim/rk3588`, `onnxruntime`, `rk3588`, or "" for a result tied to neither."""
    return "/".join(part for part in (backend, target) if part)


def place_parts(where: str) -> tuple[str, str]:
    """`("rknn-sim", "rk3588")` of `rknn-sim/rk3588` (a label may carry more after a space); the
    target is "" for a label without one (`onnxruntime`)."""
    backend, _, target = where.split(" ")[0].partition("/")
    return backend, target


@dataclass(frozen=True)
class Headline:
    """A gate's deciding number against its limit: `value relation threshold` must hold."""

    quantity: str
    value: float | None
    """None when the measurement is not a number (a NaN cosine)."""
    threshold: float
    relation: str
    """`≥` or `≤`."""
    precision: str = ".6g"

    @property
    def met(self) -> bool:
        if self.value is None:
            return False
        return self.value >= self.threshold if self.relation == "≥" else self.value <= self.threshold

    def text(self) -> str:
        value = "nan" if self.value is None else f"{self.value:{self.precision}}"
        limit = f"{self.relation} {self.threshold:g}"
        return f"{self.quantity} {value} {limit}" if self.met else f"{self.quantity} {value}, needs {limit}"


def finite(value: float | None) -> float | None:
    """A number for a headline; NaN and Inf (and a NaN turned None by JSON) are not one."""
    return float(value) if value is not None and math.isfinite(value) else None


class GateMetrics(Record):
    """The numbers one gate measured, as a typed record; each gate subclasses it once.

    Subclasses register under their gate's name, so a result read back from the cache or a
    JSON report gets its gate's record again, and renderers read typed fields, never keys.
    """

    gate: ClassVar[str] = ""
    _by_gate: ClassVar[dict[str, type[GateMetrics]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.gate:
            GateMetrics._by_gate[cls.gate] = cls

    @classmethod
    def for_gate(cls, gate: str) -> type[GateMetrics] | None:
        return cls._by_gate.get(gate)

    def headline(self) -> Headline | None:
        """The number that decided the gate, against its limit, where the gate has one."""
        return None


def build_gate_records() -> None:
    """Build every registered gate's metrics record, and the records its fields hold, now.
    A `Record` builds its validator on first use (~1 ms each); a cold verify calls this while
    it waits for the ONNX helper, not after the golden run, when a gate first fills one."""
    for metrics in GateMetrics._by_gate.values():
        held = [record for field in metrics.model_fields.values() for record in _records_in(field.annotation)]
        for record in (metrics, *held):
            record.model_rebuild()


def _records_in(annotation: Any) -> list[type[Record]]:
    """The `Record` classes in a field's type (`dict[str, OutputDrift] | None` -> OutputDrift)."""
    if isinstance(annotation, type) and issubclass(annotation, Record):
        return [annotation]
    return [record for arg in get_args(annotation) for record in _records_in(arg)]


class GateResult(BaseModel):
    """The outcome of one gate for one model (and target, and backend)."""

    model_config = ConfigDict(extra="forbid")

    model: str
    gate: str
    status: Status
    summary: str
    target: str | None = None
    backend: str | None = None
    metrics: SerializeAsAny[GateMetrics] | None = None
    details: list[str] = []
    """Lines that explain a failure: per-output numbers, mismatched files."""
    hint: str | None = None
    """What to do about a failure."""

    def __bool__(self) -> bool:
        return self.status.ok

    def but(
        self,
        *,
        status: Status | Keep = KEEP,
        summary: str | Keep = KEEP,
        details: list[str] | Keep = KEEP,
        hint: str | Keep | None = KEEP,
    ) -> GateResult:
        """This result with the named fields changed. Typed, unlike `model_copy(update=...)`, which
        checks neither the keys nor the values: a misspelt field there is silently a new attribute."""
        named = {"status": status, "summary": summary, "details": details, "hint": hint}
        return self.model_copy(update={key: value for key, value in named.items() if value is not KEEP})

    @model_validator(mode="before")
    @classmethod
    def _typed_metrics(cls, data: Any) -> Any:
        """Read stored metrics back into the record their gate registered."""
        if isinstance(data, dict) and isinstance(data.get("metrics"), dict):
            record = GateMetrics.for_gate(str(data.get("gate")))
            if record is None:  # a gate this version does not know: the numbers are dropped
                return {**data, "metrics": None}
            return {**data, "metrics": record.model_validate(data["metrics"])}
        return data

    @property
    def where(self) -> str:
        """`backend/target`, the label reports use for the place a result applies to."""
        return place_label(self.backend, self.target) or "-"


class Report(BaseModel):
    """All gate results of one `baseline verify` run."""

    lock: str
    results: list[GateResult]
    warnings: list[str] = []
    """What makes the results mean less than they seem (image inputs fed random noise)."""

    @property
    def passed(self) -> bool:
        return all(self.results)

    def counts(self) -> dict[str, int]:
        counts = {status.value: 0 for status in Status}
        for result in self.results:
            counts[result.status.value] += 1
        return counts
