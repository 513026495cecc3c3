"""The sign-off as data: what a release pins and what the gates measured, ready to render."""

from __future__ import annotations

from dataclasses import dataclass

from baseline.models.lock import AuditEntry, HostToolchain, ObservedBoard, ToolkitPin
from baseline.models.results import Status


@dataclass(frozen=True)
class ConversionRecord:
    """One pinned `.rknn` build."""

    target: str
    platform: str
    quantization: str
    """`fp16`, or `dtype / algorithm / method`."""
    artifact: str
    sha256: str
    fingerprint: str | None
    toolkit: str
    compiler: str | None


@dataclass(frozen=True)
class ModelRecord:
    """What is pinned for one model: the ONNX source, its provenance and its builds."""

    name: str
    onnx: str
    onnx_sha256: str
    opsets: dict[str, int]
    toolkit: str
    exporter_commit: str | None
    exporter_dirty: bool | None
    conversions: list[ConversionRecord]


@dataclass(frozen=True)
class Measurement:
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


@dataclass(frozen=True)
class GateCheck:
    """One gate result as the sign-off lists it."""

    model: str
    gate: str
    where: str
    status: Status
    summary: str
    measurement: Measurement | None

    @property
    def ticked(self) -> bool:
        """Passed, or failed as the intent file said it would; a skip is left for a person."""
        return self.status in (Status.PASS, Status.XFAIL)


@dataclass(frozen=True)
class Change:
    """One difference from the previous lock."""

    kind: str
    """`version`, `model`, `artifact` or `statistics`."""
    subject: str
    before: str
    after: str


@dataclass(frozen=True)
class Signoff:
    """Everything a person needs to sign off a lock, computed; rendering is separate."""

    lock: str
    passed: bool
    counts: dict[str, int]
    host: HostToolchain
    toolkits: list[ToolkitPin]
    boards: list[ObservedBoard]
    models: list[ModelRecord]
    gates: list[GateCheck]
    changes: list[Change] | None
    """None when there was no previous lock to compare with."""
    audit: list[AuditEntry]
    manual: list[str]
    """Checks no gate can make, to tick by hand."""
