"""The sign-off as data: what a release pins and what the gates measured, ready to render."""

from __future__ import annotations

from dataclasses import dataclass

from baseline.models.lock import AuditEntry, HostToolchain, ObservedBoard, ToolkitPin
from baseline.models.results import Headline, Status


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
    measured: tuple[str, ...] = ()
    """What `baseline lock` measured the unchanged model to need beyond the intent, one line each."""
    exporter_script: str | None = None
    """The pinned export script; with no command either, no exporter was declared."""
    exporter_command: str | None = None
    exporter_gap: str | None = None
    """Why the script's git facts are missing although it was declared (git not installed)."""
    accuracy: tuple[str, ...] = ()
    """Accuracy against the task's labels as locked, one line per labelled task and backend."""


@dataclass(frozen=True)
class GateCheck:
    """One gate result as the sign-off lists it."""

    model: str
    gate: str
    where: str
    status: Status
    summary: str
    headline: Headline | None
    """The gate's deciding number against its limit, where the gate has one."""

    @property
    def ticked(self) -> bool:
        """Passed, or failed as the intent file said it would; a skip is left for a person."""
        return self.status in (Status.PASS, Status.XFAIL)


@dataclass(frozen=True)
class ReleaseChange:
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
    changes: list[ReleaseChange] | None
    """None when there was no previous lock to compare with."""
    audit: list[AuditEntry]
    manual: list[str]
    """Checks no gate can make, to tick by hand."""
