"""Measured, never guessed: `baseline lock` converts and runs every model twice, nothing changed in
between, and pins what the unchanged model needs so that its own verify is green.

Three things can differ between two measurements of the same model, or between a backend and
onnxruntime, without any regression: the `.rknn` fingerprint (a build that is not bit-stable), a
backend's outputs (and with them their statistics), and the agreement of an fp16 or int8 build
with onnxruntime beyond the intent's tolerances. For each, the spread is measured here and pinned
with headroom in the model's `measured` table, where `verify` reads it (`ModelLock.tolerance`):

- fingerprints that differ → that target is judged by its I/O contract and outputs;
- agreement with onnxruntime (both runs, and today's onnxruntime against the first's tensors) →
  `min_cosine` / `max_mismatch_ratio` per output or part, where the intent's value would fail;
- statistics that move between runs → a drift `atol` per output or part.

Below the floors that mean "broken" (`models.calibration`: a cosine under 0.9, NaN / Inf where
onnxruntime has none, statistics moving by a tenth of their range) nothing is pinned: the lock is
refused, naming the `expect_fail` entry that would declare it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NoReturn

from baseline.errors import InputError
from baseline.gates.consistency import ConsistencyMetrics, ceil_significant
from baseline.locker import task_thresholds
from baseline.locker.selfcheck import (
    Measurement,
    Worst,
    against_first,
    self_check,
    where_it_breaks,
    with_headroom,
    worst_agreements,
)
from baseline.locker.task_thresholds import Needed, needed_thresholds
from baseline.models.calibration import (
    MEASURED_COSINE_FLOOR,
    MEASURED_DRIFT_FLOOR,
    Measured,
    MeasuredLimit,
    MeasuredTaskLimit,
    threshold_text,
)
from baseline.models.lock import Lock, ModelLock, ReferencePin
from baseline.models.results import GateResult, Status, place_label, place_parts
from baseline.models.task import tolerance_key
from baseline.models.tensors import TensorStats
from baseline.models.tolerances import GateTolerances
from baseline.project.layout import Project

RUNS = 2
"""Measurements per model at lock: the second one costs a conversion and a run per target."""
MARGIN = 1.5
"""Headroom on the worst measured spread, as `lock --calibrate` uses by default."""


def pin_what_varies(
    project: Project, first: Measurement, second: Measurement, progress: Callable[[str], None] | None = None
) -> list[ModelLock]:
    """The models of `first` that `second` measured again, each with its `measured` table (None
    where nothing needed pinning). Raises `InputError` where a build is broken, not noisy."""
    names = {model.name for model in second[0].models}
    lock = first[0].model_copy(update={"models": [m for m in first[0].models if m.name in names]})
    # numbers only: where a failing output diverges is the final self-check's and verify's to say
    results = [
        *self_check(project, lock, first[1], locate_divergence=False).results,
        *self_check(project, second[0], second[1], locate_divergence=False).results,
        *against_first(project, (lock, first[1]), second, ("consistency", "task"), locate_divergence=False),
    ]
    judged = [result for result in results if result.status != Status.XFAIL]  # declared inaccurate
    _refuse_non_finite(judged)
    worst = worst_agreements(lock, judged)

    def locate(w: Worst) -> str:
        if progress is not None:  # the analysis runs the build layer by layer: it can take minutes
            progress(f"{w.model} on {w.where} is broken: locating where (the toolkit's per-layer analysis)")
        return where_it_breaks(project, lock, first[1], w)

    needs = needed_thresholds(lock, judged, MARGIN)
    _refuse_broken(worst, lock, locate, [need for need in needs if need.refused is not None])
    tasks = _task_limits(needs)
    again = {model.name: model for model in second[0].models}
    return [
        _with_measured(model, again[model.name], worst, tasks.get(model.name, [])) for model in lock.models
    ]


def _with_measured(
    model: ModelLock, again: ModelLock, worst: list[Worst], tasks: list[MeasuredTaskLimit]
) -> ModelLock:
    limits = [limit for w in worst if w.model == model.name for limit in _agreement_limit(model, w)]
    limits += _drift_limits(model, again)
    varying = _varying_fingerprints(model, again)
    if not limits and not varying and not tasks:
        return model
    measured = Measured(
        runs=RUNS,
        margin=MARGIN,
        fixtures_sha256=model.fixtures.sha256,
        onnx_sha256=model.onnx.sha256,
        limits=sorted(limits, key=lambda limit: (limit.key, limit.table)),
        varying_fingerprints=varying,
        tasks=tasks,
    )
    conversions = [
        pin.model_copy(update={"metadata": pin.metadata.model_copy(update={"fingerprint": None})})
        if pin.target in varying
        else pin
        for pin in model.conversions
    ]
    return model.model_copy(update={"measured": measured, "conversions": conversions})


# ---------------------------------------------------------------- agreement with onnxruntime


def _agreement_limit(model: ModelLock, worst: Worst) -> list[MeasuredLimit]:
    """The limit one output or part needs on its worst run, where the intent's would fail it."""
    needed_cosine, needed_ratio = with_headroom(worst.cosine, worst.mismatch_ratio, MARGIN)
    intended = model.tolerances.get(worst.key)
    table = getattr(intended, worst.table) if intended is not None else None
    min_cosine = table.min_cosine if table is not None else worst.min_cosine
    max_ratio = table.max_mismatch_ratio if table is not None else (worst.max_mismatch_ratio or 0.0)
    looser_cosine = needed_cosine < min_cosine
    looser_ratio = needed_ratio > max_ratio
    if not looser_cosine and not looser_ratio:
        return []
    return [
        MeasuredLimit(
            key=worst.key,
            table=worst.table,
            min_cosine=max(MEASURED_COSINE_FLOOR, needed_cosine) if looser_cosine else None,
            max_mismatch_ratio=needed_ratio if looser_ratio else None,
            measured=f"worst of {RUNS} runs on {worst.where}: cosine {_cosine(worst.cosine)}, "
            f"{worst.mismatch_ratio:.4%} of elements beyond atol + rtol·|golden|",
        )
    ]


def _refuse_broken(
    worst: list[Worst],
    lock: Lock,
    locate: Callable[[Worst], str] | None = None,
    refused_tasks: list[Needed] | None = None,
) -> None:
    """`locate`: where a float build first parts from onnxruntime (the toolkit's per-layer
    analysis), asked once for the first broken place of a refused float build; a quantized one
    is sent to `explore`, which analyses it layer by layer. `refused_tasks`: task thresholds the
    same builds lose too, named in the same refusal (team run 20: a PP-OCRv6 detector's rv1106
    build lost its cosine and its task, and each cost a relock to be told)."""
    broken = [w for w in worst if w.cosine is not None and w.cosine < MEASURED_COSINE_FLOOR]
    if not broken:
        return
    first = broken[0]
    quantized = first.table == "consistency_quantized"
    layer = locate(first) if locate is not None and not quantized else ""
    # every broken place in one message: a refusal that names one target at a time costs the user a
    # relock (both conversions of every target) for each further target with the same loss
    others = [w for w in broken[1:] if w.model == first.model]
    more = "".join(f"; on {w.where}, output {w.key!r} at cosine {w.cosine:.6f}" for w in others)
    model = lock.model(first.model)
    unread = _unread_outputs_hint(model, [first, *others]) if model is not None else ""
    places = {place_parts(w.where)[1] for w in [first, *others]}
    lost = [
        need
        for need in refused_tasks or []
        if need.measured.model == first.model and place_parts(need.measured.where)[1] in places
    ]
    tasks = "".join(f"; on {n.measured.where}, task #{n.measured.task}: {n.refused}" for n in lost)
    _refuse(
        first.model,
        first.where,
        f"output {first.key!r} agrees with onnxruntime at cosine {first.cosine:.6f}, below "
        f"{MEASURED_COSINE_FLOOR:g}{more}" + (f"; on {first.where}, {layer}" if layer else "") + tasks,
        quantized=quantized,
        also=[w.where for w in others],
        first_step=unread,
        more_entries=[_task_entry(n.measured) for n in lost],
    )


def _task_entry(m: task_thresholds.Measured) -> str:
    """The expect_fail entry for a task threshold a build loses."""
    return _expect_fail_entry("task", place_parts(m.where)[1], _against(m))


def _against(m: task_thresholds.Measured) -> str:
    """The entry's `against` for a golden table (a task's own thresholds need none)."""
    return "" if m.table == "task" else ', against = "onnxruntime"'


def _expect_fail_entry(gate: str, target: str | None, extra: str = "") -> str:
    """One `expect_fail` entry as the intent writes it; `extra`: further keys, comma first."""
    return (
        "{ "
        + f'gate = "{gate}", '
        + (f'target = "{target}", ' if target else "")
        + f'reason = "..."{extra}'
        + " }"
    )


def _unread_outputs_hint(model: ModelLock, broken: list[Worst]) -> str:
    """Where the model's tasks read other outputs than the lost ones, keeping only what they read
    comes first. Measured on a U^2-Net saliency model (rembg's, 7 outputs): int8 on rv1106 lost
    a side output kept from training (cosine 0.88) while the map the application reads agreed at
    0.94; with only that output in the build the lock was written. Without a task nothing says
    which outputs the application reads (CenterFace's four are all decoded), so no hint."""
    read = list(dict.fromkeys(name for task in model.tasks for name in task.read))
    lost = {w.key.partition(":")[0] for w in broken}
    if not read or lost & set(read):
        return ""
    names = ", ".join(f'"{name}"' for name in read)
    return (
        f"if the application reads only what its tasks read ({names}; {sorted(lost)} may be "
        f"outputs kept from training), build only those: [models.conversion.load_onnx] "
        f"outputs = [{names}]; otherwise "
    )


def _refuse_non_finite(results: list[GateResult]) -> None:
    """NaN or Inf where onnxruntime has none (a golden with any is refused when measured)."""
    for result in results:
        metrics = result.metrics
        if result.gate != "consistency" or not isinstance(metrics, ConsistencyMetrics):
            continue
        for name, agreement in metrics.outputs.items():
            if agreement.candidate_nan or agreement.candidate_inf:
                where = place_label(result.backend, result.target)
                counts = f"{agreement.candidate_nan} NaN and {agreement.candidate_inf} Inf"
                _refuse(result.model, where, f"output {name!r} has {counts} where onnxruntime has none")


def _refuse(
    model: str,
    where: str,
    what: str,
    gate: str = "consistency",
    extra: str = "",
    *,
    quantized: bool = False,
    also: list[str] | None = None,
    first_step: str = "",
    more_entries: list[str] | None = None,
) -> NoReturn:
    """`also`: further places (`backend/target`) broken the same way, one expect_fail entry each;
    `first_step`: advice that comes before fixing the build or declaring it."""
    target = place_parts(where)[1]
    targets = list(dict.fromkeys([target, *(place_parts(place)[1] for place in also or [])]))
    entry = ", ".join([*(_expect_fail_entry(gate, t, extra) for t in targets), *(more_entries or [])])
    # a quantized build that loses this much is the case `explore` is for; it reads the lock, so
    # the expect_fail comes first
    remedy = (
        f"; then `baseline lock` and `baseline explore {model} --target {target}` tries the int8 "
        "remedies (algorithms, wider dtypes, hybrid quantization, a graph cut)"
        if quantized and target
        else ""
    )
    # an int8 build this far off is quantization's loss, which explore restores; "broken" would
    # send the reader to the conversion settings instead
    cause = "lost to int8 quantization" if quantized else "a broken build"
    raise InputError(
        f"model {model!r}: on {where}, {what}: {cause}, not noise, so no limit is measured "
        f"for it and the lock is not written; {first_step}fix the build, or declare it in the intent, in "
        f"that model's [[models]] table: expect_fail = [{entry}]{remedy}"
    )


def _cosine(value: float | None) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.6f}"


# ---------------------------------------------------------------- task thresholds


def _task_limits(needs: list[Needed]) -> dict[str, list[MeasuredTaskLimit]]:
    """Per model, the task thresholds its worst run needs (as `lock --calibrate` proposes them:
    only the spread of a reconversion loosens a task's own thresholds, only the distance from
    onnxruntime its golden tables)."""
    limits: dict[str, list[MeasuredTaskLimit]] = {}
    for need in needs:
        m = need.measured
        if need.refused is not None:
            quantized = m.table == "golden_quantized"
            _refuse(
                m.model,
                m.where,
                f"task #{m.task}: {need.refused}",
                gate="task",
                extra=_against(m),
                quantized=quantized,
            )
        limits.setdefault(m.model, []).append(
            MeasuredTaskLimit(
                task=m.task,
                table=m.table,
                field=m.field,
                value=need.value,
                measured=f"worst of {RUNS} runs: {m.field} {m.value:.4g} on {m.where}; "
                f"the intent's {threshold_text(m.field, need.current)}",
            )
        )
    return limits


# ---------------------------------------------------------------- statistics


def _drift_limits(model: ModelLock, again: ModelLock) -> list[MeasuredLimit]:
    """Per output or part: the drift atol its statistics need to stay within across two runs.
    Statistics that move by more than a tenth of the output's range are not noise: refused."""
    needed: dict[str, tuple[float, str]] = {}
    for reference in model.references:
        later = again.reference(reference.backend, reference.target)
        if later is None:
            continue
        for stats, spread in _spreads(model, reference, later):
            key = tolerance_key(stats.name)
            if spread > needed.get(key, (0.0, ""))[0]:
                needed[key] = (spread, place_label(reference.backend, reference.target))
    limits = []
    for key, (spread, where) in needed.items():
        atol = ceil_significant(spread * MARGIN, 2)
        if atol > MEASURED_DRIFT_FLOOR * model.output_range(key):
            _refuse(
                model.name,
                where,
                f"the statistics of {key!r} moved by {spread:.3g} between two runs of the unchanged "
                f"model, more than {MEASURED_DRIFT_FLOOR:g} of its range",
                gate="drift",
            )
        limits.append(
            MeasuredLimit(
                key=key,
                table="drift",
                drift_atol=atol,
                measured=f"statistics moved by up to {spread:.3g} between {RUNS} runs on {where}",
            )
        )
    return limits


def _spreads(model: ModelLock, first: ReferencePin, later: ReferencePin) -> list[tuple[TensorStats, float]]:
    """Per statistics record the later run moved beyond the intent's drift tolerance: the atol
    that would have allowed the move (the drift gate's own arithmetic, `compare.stat_deltas`)."""
    from baseline.compare import stat_deltas  # numpy: lock has it loaded already

    others = {stats.name: stats for stats in later.outputs}
    found = []
    for stats in first.outputs:
        other = others.get(stats.name)
        if other is None:
            continue
        tolerance = model.tolerances.get(tolerance_key(stats.name), GateTolerances()).drift
        excess = max(
            (
                abs(d.candidate - d.baseline) - d.allowed
                for d in stat_deltas(stats, other, tolerance)
                if d.baseline is not None and d.candidate is not None
            ),
            default=0.0,
        )
        if excess > 0:
            found.append((stats, excess + tolerance.atol))
    return found


# ---------------------------------------------------------------- fingerprints


def _varying_fingerprints(model: ModelLock, again: ModelLock) -> list[str]:
    varying = []
    for pin in model.conversions:
        other = again.conversion(pin.target)
        first, second = pin.metadata.fingerprint, other.metadata.fingerprint if other else None
        if first is not None and second is not None and first != second:
            varying.append(pin.target)
    return varying
