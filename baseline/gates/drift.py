"""Drift gate: do a backend's output statistics stay within tolerance of the locked baseline?"""

from __future__ import annotations

from typing import Any

from pydantic import field_validator

from baseline.backends import GOLDEN
from baseline.gates import advice
from baseline.gates.contract import GateInputs, GateJob, Reads, judgeable_outputs
from baseline.models.base import Record, replaced
from baseline.models.lock import ModelLock, ReferencePin
from baseline.models.results import GateMetrics, GateResult, Headline, finite, null_is_nan
from baseline.models.task import is_channel_key, tolerance_key
from baseline.models.tensors import STAT_FIELDS, TensorStats
from baseline.models.tolerances import DriftTolerance

NAME = "drift"


class OutputDrift(Record):
    """How far one output's statistics moved, as a multiple of what is allowed."""

    worst_ratio: float
    candidate: TensorStats

    @field_validator("worst_ratio", mode="before")
    @classmethod
    def _null_is_nan(cls, value: Any) -> Any:
        return null_is_nan(value)


class DriftMetrics(GateMetrics):
    gate = NAME

    outputs: dict[str, OutputDrift] = {}
    requantized: bool = False
    """The ONNX file is not the locked one, so a quantized build was quantized afresh: its
    statistics were also allowed their locked distance from onnxruntime (`quantization_slack`)."""

    @property
    def worst_ratio(self) -> float:
        return max((output.worst_ratio for output in self.outputs.values()), default=0.0)

    def headline(self) -> Headline | None:
        if not self.outputs:
            return None
        name = max(self.outputs, key=lambda output: self.outputs[output].worst_ratio)
        return Headline(f"worst drift / allowed ({name})", finite(self.outputs[name].worst_ratio), 1.0, "≤")


def jobs(model: ModelLock) -> list[GateJob]:
    return [GateJob(NAME, backend=ref.backend, target=ref.target) for ref in model.references]


def reads(model: ModelLock, job: GateJob) -> Reads:
    """Today's run; the locked statistics are in the model's lock entry; the ONNX pin says whether
    the model itself changed (the advice differs). A quantized build also reads onnxruntime's run:
    whether the changed model still behaves in float decides between "accept or revert" and "the
    change broke quantization"."""
    assert job.backend is not None
    runs = {(job.backend, job.target)}
    if model.quantized(job.target) and model.reference(GOLDEN, None) is not None:
        runs.add((GOLDEN, None))
    return Reads(files=frozenset({advice.ONNX_KEY}), runs=frozenset(runs))


def check(job: GateJob, inputs: GateInputs) -> GateResult:
    assert job.backend is not None
    model = inputs.model
    reference = model.reference(job.backend, job.target)
    if reference is None:
        return inputs.skipped("no locked reference")
    outputs = judgeable_outputs(inputs, job.backend, job.target)  # drift reads their statistics
    if isinstance(outputs, GateResult):
        return advice.unjudged(outputs, inputs)
    candidates = {s.name: s for s in inputs.output_stats(job.backend, job.target)}
    changed = advice.model_changed(inputs)
    details, metrics = _compare_outputs(model, reference, candidates, requantized=changed)
    if not details:
        worst = (
            "no statistic moved" if metrics.worst_ratio == 0 else f"worst {metrics.worst_ratio:.2g}× allowed"
        )
        summary = f"{_counted(model, reference)} within tolerance ({worst})"
        return inputs.result(metrics, summary=summary)
    return inputs.failed(
        f"{len(details)} statistics drifted; first: {details[0]}",
        details=details,
        hint=_hint(job, inputs, changed),
        metrics=metrics,
    )


def _hint(job: GateJob, inputs: GateInputs, changed: bool) -> str:
    model = inputs.model
    if not changed:
        return "if the change is intended, run `baseline lock` to take the new baseline"
    if model.quantized(job.target) and _float_still_behaves(inputs):
        return advice.quantization_broke(model, job.target)
    return advice.changed_model(model)


def _float_still_behaves(inputs: GateInputs) -> bool:
    """Whether onnxruntime's outputs of today's model are within the drift tolerance of the lock's."""
    reference = inputs.model.reference(GOLDEN, None)
    if reference is None or inputs.run(GOLDEN, None).outputs is None:
        return False
    candidates = {s.name: s for s in inputs.output_stats(GOLDEN, None)}
    details, _ = _compare_outputs(inputs.model, reference, candidates, requantized=False)
    return not details


def _compare_outputs(
    model: ModelLock, reference: ReferencePin, candidates: dict[str, TensorStats], *, requantized: bool
) -> tuple[list[str], DriftMetrics]:
    details = _unlocked_parts(model, reference)
    outputs: dict[str, OutputDrift] = {}
    part_keys = {part.key for part in model.parts}
    ranges = {stats.name: _span(stats) for stats in reference.outputs if stats.name in part_keys}
    for baseline in reference.outputs:
        what = _what(baseline.name, part_keys)
        candidate = candidates.get(baseline.name)
        if candidate is None:
            details.append(f"{what} is missing")
            continue
        tolerance, band = _part_band(model.tolerance(baseline.name).drift, baseline.name, ranges)
        slack = quantization_slack(model, reference, baseline, requantized)
        lines, ratio = _compare_output(what, baseline, candidate, tolerance, band, slack)
        details += lines
        outputs[baseline.name] = OutputDrift(worst_ratio=ratio, candidate=candidate)
    return details, DriftMetrics(outputs=outputs, requantized=requantized)


PART_BAND = 2e-3
"""A part's and its channels' statistics may also move by this fraction of the part's locked range
(finer than an int8 build resolves it): a retrain that moves no detection shifts class scores by
up to 7.5e-4 of a 0.37 range and near-zero tails by 3e-5, within it; a class bias or swap moves
them by far more (and the task gate judges the decoded classes)."""


def _part_band(tolerance: DriftTolerance, name: str, ranges: dict[str, float]) -> tuple[DriftTolerance, str]:
    """A part or channel judged against its part's resolution: the part's range widens `atol`;
    the note says so in a failure's line."""
    part_range = ranges.get(tolerance_key(name), 0.0)
    if not part_range:
        return tolerance, ""
    note = f", atol includes {PART_BAND:g} of the part's locked range {part_range:.3g}"
    return replaced(tolerance, atol=tolerance.atol + PART_BAND * part_range), note


def quantization_slack(
    model: ModelLock, reference: ReferencePin, locked: TensorStats, requantized: bool
) -> dict[str, float]:
    """A changed ONNX file's quantized build has its statistics resolved only to within its own
    distance from the float model: any change to the ONNX file is quantized afresh (new
    calibration ranges and scales), which redraws that error. Each statistic of such a build may
    also move by how far the locked build's value lies from onnxruntime's locked value of the
    same statistic (measured: a control retrain, every YOLOv8n class logit +0.003, moved a hybrid
    w8a8 build's class-7 max by 0.0018, where quantization had put it 0.011 from onnxruntime's;
    a class bias moves its class by 0.25). A float or fp16 build, and onnxruntime itself, get
    none; so does an unchanged ONNX file (`requantized` false), whose quantized statistics move
    only when the conversion or its calibration does, which is what drift is there to see."""
    if not requantized or reference.target is None or not model.quantized(reference.target):
        return {}
    golden = model.reference(GOLDEN, None)
    same = next((s for s in golden.outputs if s.name == locked.name), None) if golden else None
    if same is None:
        return {}
    slack = {}
    for field in STAT_FIELDS:
        built, floating = getattr(locked, field), getattr(same, field)
        if built is not None and floating is not None:
            slack[field] = abs(built - floating)
    return slack


def _span(stats: TensorStats) -> float:
    return 0.0 if stats.max is None or stats.min is None else stats.max - stats.min


def _unlocked_parts(model: ModelLock, reference: ReferencePin) -> list[str]:
    """A declared part the lock holds no statistics for would escape drift: say so (a lock taken
    before the part was declared, or one edited by hand)."""
    locked = {stats.name for stats in reference.outputs}
    missing = [part for part in model.parts if part.key not in locked]
    missing += [
        part
        for part in model.parts
        if part.per_channel and part.key in locked and part.channel_key(0) not in locked
    ]
    return [
        f"part {part.key!r}{' (per channel)' if part.key in locked else ''} has no locked statistics; "
        "run `baseline lock` to take them"
        for part in missing
    ]


def _what(name: str, part_keys: set[str]) -> str:
    """`output 'probs'`, `part 'output0:scores'`, `channel 'output0:scores[13]'`."""
    if tolerance_key(name) in part_keys:
        return f"channel {name!r}" if is_channel_key(name) else f"part {name!r}"
    return f"output {name!r}"


def _counted(model: ModelLock, reference: ReferencePin) -> str:
    part_keys = {part.key for part in model.parts}
    names = [stats.name for stats in reference.outputs]
    channels = sum(1 for name in names if is_channel_key(name) and tolerance_key(name) in part_keys)
    parts = sum(1 for name in names if name in part_keys)
    outputs = len(reference.outputs) - channels - parts
    counted = [f"{outputs} outputs"]
    counted += [f"{parts} parts"] if parts else []
    counted += [f"{channels} channels"] if channels else []
    return ", ".join(counted)


def _compare_output(
    what: str,
    baseline: TensorStats,
    candidate: TensorStats,
    tolerance: DriftTolerance,
    band: str = "",
    slack: dict[str, float] | None = None,
) -> tuple[list[str], float]:
    from baseline import compare

    lines = [
        f"{what} {field}: baseline {old} → {new}"
        for field in ("shape", "dtype", "nan", "inf")
        if (old := getattr(baseline, field)) != (new := getattr(candidate, field))
    ]
    slack = slack or {}
    deltas = compare.stat_deltas(baseline, candidate, tolerance, slack)
    lines += [
        f"{what} {d.statistic}: baseline {_fmt(d.baseline)} → {_fmt(d.candidate)} "
        f"(|Δ| {_delta(d.baseline, d.candidate)} > allowed {d.allowed:.3g} = "
        f"atol {tolerance.atol:.3g} + rtol {tolerance.rtol:g}·|baseline|"
        f"{_slack_note(slack.get(d.statistic, 0.0))}{band})"
        for d in deltas
        if d.exceeded
    ]
    return lines, max(d.ratio for d in deltas)


def _slack_note(slack: float) -> str:
    return f" + {slack:.3g} (the quantized build's distance from onnxruntime)" if slack else ""


def _fmt(value: float | None) -> str:
    return "none" if value is None else f"{value:.6g}"


def _delta(old: float | None, new: float | None) -> str:
    return "n/a" if old is None or new is None else f"{abs(new - old):.3g}"
