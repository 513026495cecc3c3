"""Tolerances of the numeric gates. Defaults are chosen for float32 CPU references."""

from __future__ import annotations

from pydantic import Field

from baseline.models.base import Record


class DriftTolerance(Record):
    """A statistic may move by at most `atol + rtol * |baseline|`."""

    atol: float = Field(default=1e-5, ge=0, allow_inf_nan=False)
    rtol: float = Field(default=1e-3, ge=0, allow_inf_nan=False)


class ConsistencyTolerance(Record):
    """How closely a float or fp16 build must reproduce the golden (onnxruntime) outputs.

    An element mismatches when `|candidate - golden| > atol + rtol * |golden|`; the gate
    passes when cosine similarity is at least `min_cosine` and at most
    `max_mismatch_ratio` of the elements mismatch. The defaults leave room for fp16
    rounding (measured max abs error ~1e-3 on the demo models).
    """

    min_cosine: float = Field(default=0.9999, ge=-1, le=1)
    atol: float = Field(default=5e-3, ge=0, allow_inf_nan=False)
    rtol: float = Field(default=1e-2, ge=0, allow_inf_nan=False)
    max_mismatch_ratio: float = Field(default=0.001, ge=0, le=1)


class QuantizedConsistencyTolerance(ConsistencyTolerance):
    """The same judgement for int8 builds, where every element moves a little."""

    min_cosine: float = Field(default=0.99, ge=-1, le=1)
    atol: float = Field(default=5e-2, ge=0, allow_inf_nan=False)
    rtol: float = Field(default=5e-2, ge=0, allow_inf_nan=False)
    max_mismatch_ratio: float = Field(default=0.05, ge=0, le=1)


class GateTolerances(Record):
    """The tolerances that apply to one output tensor."""

    drift: DriftTolerance = DriftTolerance()
    consistency: ConsistencyTolerance = ConsistencyTolerance()
    consistency_quantized: QuantizedConsistencyTolerance = QuantizedConsistencyTolerance()

    def for_build(self, quantized: bool) -> ConsistencyTolerance:
        return self.consistency_quantized if quantized else self.consistency


class ToleranceSpec(GateTolerances):
    """Model-wide tolerances with per-output and per-part overrides, as users write them.

    `outputs."output0"` overrides for one output; `outputs."output0:scores"` for one part of it
    (a part starts from its output's tolerances).
    """

    outputs: dict[str, GateTolerances] = {}
