"""Tolerances from measurement: what `baseline lock` proposes when its own baseline fails its
gates, and what `baseline lock --calibrate` measured to propose them (kept in the lock as
provenance; the rules themselves stay in the intent, where review sees them)."""

from __future__ import annotations

from typing import Literal

from baseline.models.base import Name, Record

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


class Calibration(Record):
    """Provenance of proposed tolerances: how they were measured."""

    runs: int
    """Independent lock measurements (each reconverts the model for every target)."""
    samples: dict[str, int]
    """Fixture samples per model."""
    margin: float
    """Proposed = measured with this factor of headroom on (1 - cosine) and on the mismatch ratio."""
    entries: list[CalibrationEntry] = []
