"""Consistency gate: does a backend reproduce onnxruntime's outputs on the fixtures?

A simulator (or board) is compared with onnxruntime running the same model today, so a
model change shows up in `drift` while `consistency` still answers "does the NPU build
agree with the float model?". For onnxruntime itself the gate compares today's run with
the locked golden tensors element by element. When a simulator disagrees, the toolkit's
accuracy analysis names the first layer where the cosine drops.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from baseline.backends import GOLDEN
from baseline.errors import BaselineError
from baseline.files.textsafe import first_line
from baseline.gates import advice
from baseline.gates.contract import GateInputs, GateJob, Reads, judgeable_outputs, reference_key
from baseline.models.base import Record, replaced
from baseline.models.calibration import ToleranceProposal, ToleranceTable
from baseline.models.lock import ModelLock
from baseline.models.results import GateMetrics, GateResult, Headline, LayerError, finite, place_label
from baseline.models.task import OutputPart, tolerance_key
from baseline.models.tensors import TensorComparison
from baseline.models.tolerances import ConsistencyTolerance
from baseline.toolchain.analysis import first_divergent_layer

if TYPE_CHECKING:  # numpy: only when outputs are really compared
    import numpy as np

    from baseline.files.tensors import TensorSet

    PartSlice = tuple[str, str, np.ndarray, np.ndarray]

NAME = "consistency"


class OutputAgreement(Record):
    """How one output (or part `out:part`, or channel `out:part[3]`) of the candidate agrees with
    the golden, and the limits it had to meet."""

    cosine: float | None
    max_abs: float | None
    mean_abs: float | None
    max_rel: float | None
    mean_rel: float | None
    mismatches: int
    total: int
    candidate_nan: int
    candidate_inf: int
    min_cosine: float
    max_mismatch_ratio: float | None = None
    """The allowed fraction of mismatching elements (None in results cached before it was kept)."""

    @property
    def mismatch_ratio(self) -> float:
        return self.mismatches / self.total if self.total else 0.0

    @property
    def judged_cosine(self) -> float | None:
        """The cosine the gate judged: None where it is the direction of noise (see
        `below_resolution`)."""
        return None if below_resolution(self.max_rel, self.mismatches) else self.cosine


class ConsistencyMetrics(GateMetrics):
    gate = NAME

    outputs: dict[str, OutputAgreement] = {}
    layers: list[LayerError] = []
    """The toolkit's per-layer accuracy analysis, when the candidate disagreed."""
    analysis_error: str | None = None

    def headline(self) -> Headline | None:
        """The output with the least margin above its min cosine (a NaN cosine is worst)."""
        candidates = []
        for name, output in self.outputs.items():
            cosine = finite(output.cosine)
            margin = -math.inf if cosine is None else cosine - output.min_cosine
            candidates.append(
                (margin, Headline(f"min cosine ({name})", cosine, output.min_cosine, "≥", ".6f"))
            )
        return min(candidates, key=lambda pair: pair[0])[1] if candidates else None


def jobs(model: ModelLock) -> list[GateJob]:
    others = [backend for backend in model.backends if backend != GOLDEN]
    return [GateJob(NAME, backend=GOLDEN)] + [
        GateJob(NAME, backend=backend, target=t.name) for backend in others for t in model.targets
    ]


def reads(model: ModelLock, job: GateJob) -> Reads:
    """The golden job compares today's onnxruntime run with the locked golden tensors; the
    others compare their run with today's onnxruntime run."""
    assert job.backend is not None
    runs = frozenset({(job.backend, job.target), (GOLDEN, None)})
    if job.backend == GOLDEN and model.reference(GOLDEN, None) is not None:
        # the ONNX pin too: a golden that moved because the model changed is advised otherwise
        return Reads(files=frozenset({reference_key(GOLDEN, None), advice.ONNX_KEY}), runs=runs)
    # the ONNX pin: the advice for a build's inaccuracy says whether the model changed
    return Reads(files=frozenset({advice.ONNX_KEY}), runs=runs)


def check(job: GateJob, inputs: GateInputs) -> GateResult:
    assert job.backend is not None
    model = inputs.model
    if model.reference(GOLDEN, None) is None:
        return inputs.skipped("no golden outputs")
    outputs = judgeable_outputs(inputs, job.backend, job.target)
    if isinstance(outputs, GateResult):
        return advice.unjudged(outputs, inputs)
    golden = _golden(job, inputs)
    if golden is None:
        return inputs.errored(f"{GOLDEN} produced no outputs: {inputs.run(GOLDEN, None).error}")
    quantized = model.quantized(job.target)
    comparisons, failures, disagreeing = _compare_all(model, outputs, golden, quantized, job.backend)
    metrics = ConsistencyMetrics(
        outputs={c.name: _agreement(c, model.tolerance(c.name).for_build(quantized)) for c in comparisons}
    )
    if not failures:
        worst = min((c.cosine for c in comparisons if c.cosine is not None), default=1.0)
        summary = f"{_counted(comparisons, model)} agree with {GOLDEN} (min cosine {worst:.6f})"
        return inputs.result(metrics, summary=summary + _measured_note(model, comparisons))
    # counted by tensor, not by line: one output fails its cosine and its element count
    counted = f"{disagreeing} of {len(golden) + _part_count(comparisons, golden)} {_compared(model)} disagree"
    summary = f"{counted} with {GOLDEN}; first: {failures[0]}"
    if job.backend == GOLDEN and advice.model_changed(inputs):
        # today's model against the locked one: not an accuracy question, no tolerance to loosen
        return inputs.failed(
            f"the model changed since the lock: {counted} with the locked {GOLDEN} outputs; "
            f"first: {failures[0]}",
            details=failures,
            hint=advice.changed_model(model),
            metrics=metrics,
        )
    metrics, layer = _locate(job, inputs, metrics)
    if layer is not None:
        summary += f"; first divergent layer {layer.line()}"
        failures.append(f"first divergent layer (accuracy_analysis): {layer.line()}")
    elif metrics.analysis_error is not None:  # said where it is read, not only in the JSON
        summary += f"; no first divergent layer: {first_line(metrics.analysis_error)}"
        failures.append(f"accuracy_analysis could not run: {metrics.analysis_error}")
    where = place_label(job.backend, job.target)
    if any(output.candidate_nan or output.candidate_inf for output in metrics.outputs.values()):
        hint = advice.non_finite(where, _first_non_finite(metrics.layers) or layer, quantized)
    else:
        loosen = _hint(model, metrics, quantized, where)
        hint = advice.inaccurate(model, job.target, layer, loosen, changed=advice.model_changed(inputs))
    return inputs.failed(summary, details=failures, hint=hint, metrics=metrics)


def _first_non_finite(layers: list[LayerError]) -> LayerError | None:
    """The first layer whose accumulated cosine is NaN / Inf: where an overflow starts."""
    return next((layer for layer in layers if not math.isfinite(layer.entire_cosine)), None)


def _hint(model: ModelLock, metrics: ConsistencyMetrics, quantized: bool, where: str) -> str:
    """The intent keys and values that would accept this accuracy (a channel counts towards its
    part's key), or the general advice when no limit can be named (a NaN cosine)."""
    table: ToleranceTable = "consistency_quantized" if quantized else "consistency"
    needed: dict[tuple[str, str], ToleranceProposal] = {}
    for name, agreement in metrics.outputs.items():
        for proposal in tolerances_that_pass(
            model=model.name,
            key=tolerance_key(name),
            table=table,
            where=where,
            cosine=finite(agreement.cosine),
            mismatch_ratio=agreement.mismatch_ratio,
            min_cosine=agreement.min_cosine,
            max_mismatch_ratio=agreement.max_mismatch_ratio,
        ):
            slot = (proposal.key, proposal.field)
            kept = needed.get(slot)
            lower_is_looser = proposal.field == "min_cosine"
            if kept is None or (proposal.value < kept.value) == lower_is_looser:
                needed[slot] = proposal
    if not needed:
        return "if this accuracy is acceptable, loosen [models.tolerances] in the intent file"
    values = "; ".join(f"{p.intent_key} {p.field} = {p.value:g}" for p in needed.values())
    return f"if this accuracy is acceptable, set in the intent file: {values}"


def tolerances_that_pass(
    *,
    model: str,
    key: str,
    table: ToleranceTable,
    where: str,
    cosine: float | None,
    mismatch_ratio: float,
    min_cosine: float,
    max_mismatch_ratio: float | None,
) -> list[ToleranceProposal]:
    """The values of the limits this agreement breaks that it would meet (cosine rounded down,
    mismatch ratio rounded up): what `verify`'s hint and `lock`'s self-check both propose."""
    common = {"model": model, "key": key, "table": table, "where": where}
    proposals = []
    if cosine is not None and cosine < min_cosine:
        proposals.append(
            ToleranceProposal(
                **common,
                field="min_cosine",
                value=floor_digits(cosine, 6),
                current=min_cosine,
                measured=cosine,
            )
        )
    if max_mismatch_ratio is not None and mismatch_ratio > max_mismatch_ratio:
        proposals.append(
            ToleranceProposal(
                **common,
                field="max_mismatch_ratio",
                value=ceil_significant(mismatch_ratio, 2),
                current=max_mismatch_ratio,
                measured=mismatch_ratio,
            )
        )
    return proposals


def floor_digits(value: float, digits: int) -> float:
    scale = 10.0**digits
    return float(round(math.floor(value * scale) / scale, digits))


def ceil_significant(value: float, digits: int) -> float:
    """`value` rounded up to `digits` significant digits: 0.01453 → 0.015."""
    if value <= 0:
        return 0.0
    exponent = math.floor(math.log10(value)) - digits + 1
    scale = 10.0**exponent
    return float(round(math.ceil(round(value / scale, 9)) * scale, max(0, -exponent)))


def _counted(comparisons: list[TensorComparison], model: ModelLock) -> str:
    parts = {part.key for part in model.parts}
    in_parts = [c for c in comparisons if tolerance_key(c.name) in parts]
    counted = f"{len(comparisons) - len(in_parts)} outputs"
    return counted + (f" and {len(in_parts)} parts/channels" if in_parts else "")


def _measured_note(model: ModelLock, comparisons: list[TensorComparison]) -> str:
    """Which outputs were judged with limits the lock measured rather than the intent's."""
    if model.measured is None:
        return ""
    measured = {limit.key for limit in model.measured.limits if limit.table != "drift"}
    judged = sorted({tolerance_key(c.name) for c in comparisons} & measured)
    return f"; limits measured at lock for {', '.join(map(repr, judged))}" if judged else ""


def _golden(job: GateJob, inputs: GateInputs) -> TensorSet | None:
    if job.backend == GOLDEN:
        return inputs.tensors(reference_key(GOLDEN, None))
    return inputs.run(GOLDEN, None).outputs


def _compare_all(
    model: ModelLock, outputs: TensorSet, golden: TensorSet, quantized: bool, backend: str
) -> tuple[list[TensorComparison], list[str], int]:
    """Every output, then every declared part and channel, each against its own tolerance: the
    comparisons, the failures (a line each) and how many tensors have one."""
    from baseline import compare  # numpy: only when outputs are really compared

    comparisons, failures, disagreeing = [], [], 0
    for name, expected in golden.items():
        if name not in outputs:
            failures.append(f"output {name!r} is missing from {backend}")
            disagreeing += 1
            continue
        tolerance = model.tolerance(name).for_build(quantized)
        comparison = compare.compare_tensors(name, outputs[name], expected, tolerance.atol, tolerance.rtol)
        comparisons.append(comparison)
        found = _failures(f"output {name!r}", comparison, tolerance)
        failures += found
        disagreeing += bool(found)
    for part in model.parts:
        tolerance = model.tolerance(part.key).for_build(quantized)
        for what, key, candidate, expected in _part_slices(part, outputs, golden):
            comparison = compare.compare_tensors(key, candidate, expected, tolerance.atol, tolerance.rtol)
            comparisons.append(comparison)
            found = _failures(what, comparison, tolerance)
            failures += found
            disagreeing += bool(found)
    return comparisons, failures, disagreeing


def _part_count(comparisons: list[TensorComparison], golden: TensorSet) -> int:
    """The compared parts and channels: every comparison not of a whole output."""
    return sum(1 for comparison in comparisons if comparison.name not in golden)


def _compared(model: ModelLock) -> str:
    return "outputs and parts" if model.parts else "outputs"


def _part_slices(part: OutputPart, outputs: TensorSet, golden: TensorSet) -> list[PartSlice]:
    """(label, key, candidate, golden) for a part and, with `per_channel`, each of its channels.

    A part whose output is missing or no longer fits is left out: the whole output's comparison
    already says so (missing, or a different shape)."""
    from baseline.errors import InputError
    from baseline.tasks.parts import part_channels, slice_part

    try:
        candidate, expected = slice_part(part, outputs), slice_part(part, golden)
    except InputError:
        return []
    if candidate.shape != expected.shape:
        return []
    slices = [(f"part {part.key!r}", part.key, candidate, expected)]
    if part.per_channel:
        pairs = zip(part_channels(part, candidate), part_channels(part, expected), strict=True)
        slices += [
            (f"channel {part.channel_key(index)!r}", part.channel_key(index), cand, gold)
            for (index, cand), (_, gold) in pairs
        ]
    return slices


def _locate(
    job: GateJob, inputs: GateInputs, metrics: ConsistencyMetrics
) -> tuple[ConsistencyMetrics, LayerError | None]:
    """Ask the toolkit where the outputs go wrong: the first layer whose cosine drops."""
    if job.backend == GOLDEN or job.backend is None:
        return metrics, None
    try:
        layers = inputs.analyse(job.backend, job.target)
    except BaselineError as error:
        return replaced(metrics, analysis_error=str(error)), None
    threshold = min((output.min_cosine for output in metrics.outputs.values()), default=1.0)
    return replaced(metrics, layers=layers), first_divergent_layer(layers, threshold)


def _failures(what: str, c: TensorComparison, tolerance: ConsistencyTolerance) -> list[str]:
    if not c.shape_match:
        return [f"{what}: shape {c.candidate_shape} ≠ golden {c.golden_shape}"]
    failures = []
    new_non_finite = (c.candidate_nan + c.candidate_inf) - (c.golden_nan + c.golden_inf)
    if new_non_finite > 0:
        failures.append(
            f"{what}: {c.candidate_nan} NaN and {c.candidate_inf} Inf "
            f"(golden has {c.golden_nan} and {c.golden_inf})"
        )
    if (
        c.cosine is not None
        and c.cosine < tolerance.min_cosine
        and not below_resolution(c.max_rel, c.mismatches)
    ):
        failures.append(f"{what}: cosine {c.cosine:.6f} < {tolerance.min_cosine}")
    if c.mismatch_ratio > tolerance.max_mismatch_ratio:
        relative = "" if c.max_rel is None else f", max rel {_num(c.max_rel)} where |golden| > {c.atol:g}"
        failures.append(
            f"{what}: {c.mismatches} of {c.total} elements ({c.mismatch_ratio:.3%}) "
            f"differ beyond atol {c.atol:g} + rtol {c.rtol:g}·|golden| (allowed "
            f"{tolerance.max_mismatch_ratio:.3%}); max abs {_num(c.max_abs)}, "
            f"mean abs {_num(c.mean_abs)}{relative}"
        )
    return failures


def below_resolution(max_rel: float | None, mismatches: int) -> bool:
    """No golden element beyond `atol` (`max_rel` is measured over those only) and every element
    within it: the two tensors are equal by the gate's own definition, and their cosine is the
    direction of noise (a class channel whose scores sit near 0), so it is not judged."""
    return max_rel is None and mismatches == 0


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _agreement(c: TensorComparison, tolerance: ConsistencyTolerance) -> OutputAgreement:
    return OutputAgreement(
        cosine=c.cosine,
        max_abs=c.max_abs,
        mean_abs=c.mean_abs,
        max_rel=c.max_rel,
        mean_rel=c.mean_rel,
        mismatches=c.mismatches,
        total=c.total,
        candidate_nan=c.candidate_nan,
        candidate_inf=c.candidate_inf,
        min_cosine=tolerance.min_cosine,
        max_mismatch_ratio=tolerance.max_mismatch_ratio,
    )
