"""`baseline lock` judges the baseline it has just measured, and proposes tolerances from numbers.

A lock whose own simulator outputs already fail `consistency` (or `task`) with the intent's
tolerances would fail every `verify`; the team finds out later, from CI, with a hint that
names no value. Here the gates run on the runs the lock measured (nothing is converted or run
again: the runs are seeded into a verification context), and every failing output or part gets
the intent key and the value that would pass. `--calibrate` repeats the whole measurement
(`baseline.locker.calibrate`) and proposes values with headroom over the worst run (`calibrate`
here); the lock records what was measured.
"""

from __future__ import annotations

import copy
import io
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from baseline.backends import BackendRun
from baseline.errors import BaselineError
from baseline.files.tensors import TensorSet
from baseline.files.textsafe import first_line, one_line
from baseline.gates import GATES_BY_NAME, run_gate
from baseline.gates.consistency import (
    ConsistencyMetrics,
    OutputAgreement,
    ceil_significant,
    floor_digits,
    tolerances_that_pass,
)
from baseline.gates.context import VerifyContext
from baseline.gates.contract import Gate, GateJob, Reads, model_view
from baseline.locker.task_thresholds import calibrate_tasks, task_proposals_to_pass
from baseline.models.calibration import (
    MEASURED_COSINE_FLOOR,
    Calibration,
    CalibrationEntry,
    TaskThresholdEntry,
    TaskThresholdProposal,
    ToleranceProposal,
    ToleranceTable,
    task_key,
    threshold_text,
)
from baseline.models.lock import Lock, ModelLock
from baseline.models.results import GateResult, Status, place_label, place_parts
from baseline.models.task import tolerance_key
from baseline.models.task_golden import BROKEN_ABOVE, BROKEN_BEYOND, lower_bound
from baseline.project.layout import Project
from baseline.toolchain.analysis import first_divergent_layer
from baseline.verification.runcache import RunCache

SELF_CHECKED_GATES = ("consistency", "task")
"""The gates whose verdict a fresh baseline does not settle by construction (drift and
integrity compare the lock with itself)."""
MIN_PROPOSED_MISMATCH = 1e-4
"""Calibration never proposes fewer than 0.01 % mismatching elements: one element flipping
between reconversions must not fail a verify."""
MAX_PROPOSED_COSINE = 0.999999
MIN_PROPOSED_COSINE = MEASURED_COSINE_FLOOR
"""Below this a cosine is a broken build, not a spread to calibrate for: calibration proposes no
lower value and says so, and `lock` pins none (the one floor, `MEASURED_COSINE_FLOOR`)."""


def with_headroom(cosine: float | None, mismatch_ratio: float, margin: float) -> tuple[float, float]:
    """The `min_cosine` and `max_mismatch_ratio` that a worst measured agreement meets with `margin`
    headroom on (1 - cosine) and on the ratio: what `--calibrate` proposes and `lock` pins."""
    distance = 1 - (1.0 if cosine is None else cosine)
    proposed_cosine = min(MAX_PROPOSED_COSINE, floor_digits(1 - distance * margin, 6))
    proposed_ratio = min(1.0, max(MIN_PROPOSED_MISMATCH, ceil_significant(mismatch_ratio * margin, 2)))
    return proposed_cosine, proposed_ratio


@dataclass(frozen=True)
class SelfCheck:
    results: list[GateResult]
    proposals: list[ToleranceProposal | TaskThresholdProposal]

    @property
    def failed(self) -> list[GateResult]:
        return [result for result in self.results if result.status in (Status.FAIL, Status.ERROR)]

    def lines(self) -> list[str]:
        """What `baseline lock` says about a baseline that fails its own gates."""
        lines = [
            f"model {r.model}: {r.gate} on {r.where} fails on the new baseline: {r.summary}"
            for r in self.failed
        ]
        return lines + [proposal.line() for proposal in self.proposals]


def self_check(
    project: Project,
    lock: Lock,
    pending: dict[Path, bytes],
    locate_divergence: bool = True,
    runs: RunCache | None = None,
) -> SelfCheck:
    """Run the gates of `SELF_CHECKED_GATES` on the runs `lock` holds (their tensors in `pending`,
    the files `baseline lock` is about to write); `locate_divergence=False` leaves out the toolkit's
    per-layer analysis of a failing comparison (see `VerifyContext.locate_divergence`), which
    `runs` keeps beside the runs it analyses (a tolerance edit does not ask the toolkit again)."""
    context = VerifyContext(project, lock, locate_divergence=locate_divergence, stored_runs=runs)
    arrays = _pending_arrays(project, pending)
    results = []
    for model in lock.models:
        _seed(context, model, arrays)
        for name in SELF_CHECKED_GATES:
            gate = GATES_BY_NAME[name]
            results += [
                run_gate(model, job, context)
                for job in gate.jobs(model)
                if job.backend is not None and model.reference(job.backend, job.target) is not None
            ]
    proposals: list[ToleranceProposal | TaskThresholdProposal] = [*proposals_to_pass(lock, results)]
    proposals.extend(task_proposals_to_pass(lock, results))
    return SelfCheck(results, proposals)


def against_first(
    project: Project,
    first: Measurement,
    later: Measurement,
    gates: Sequence[str] = ("task",),
    locate_divergence: bool = True,
) -> list[GateResult]:
    """`gates` (the task gate) on a later measurement's runs against the first measurement's as
    locked.

    Each measurement's own self-check compares a run with itself as locked (no spread by
    construction); this is the spread of a reconversion, all that the locked comparison of an
    unchanged model sees in `verify`, and the only measurement that may loosen a task's own
    thresholds. A job whose runs the later measurement did not write is skipped: nothing is run."""
    lock = first[0]
    context = VerifyContext(project, lock, locate_divergence=locate_divergence)
    locked, today = _pending_arrays(project, first[1]), _pending_arrays(project, later[1])
    results = []
    for model in lock.models:
        runs = _later_runs(later[0], model.name, today)
        for (backend, target), run in runs.items():
            context.seed(model.name, backend, target, run)
        for reference in model.references:
            if reference.tensors.path in locked:
                context.seed_tensors(reference.tensors, _load(locked[reference.tensors.path]))
        for gate in (GATES_BY_NAME[name] for name in gates):
            jobs = [job for job in gate.jobs(model) if _reads(gate, model, job).runs <= runs.keys()]
            results += [run_gate(model, job, context) for job in jobs]
    return results


Measurement = tuple[Lock, dict[Path, bytes]]
"""A lock `baseline lock` measured and the files it would write (its runs' tensors among them)."""


def _later_runs(lock: Lock, name: str, arrays: dict[str, bytes]) -> dict[tuple[str, str | None], BackendRun]:
    # a reference file's name carries a hash of its content: find a run by backend and target
    model = lock.model(name)
    return {
        (ref.backend, ref.target): BackendRun(outputs=_load(arrays[ref.tensors.path]))
        for ref in (model.references if model is not None else [])
        if ref.tensors.path in arrays
    }


def _reads(gate: Gate, model: ModelLock, job: GateJob) -> Reads:
    return gate.reads(model_view(model, job.backend, job.target), job)


def _pending_arrays(project: Project, pending: dict[Path, bytes]) -> dict[str, bytes]:
    return {project.relative(path): data for path, data in pending.items() if path.suffix == ".npz"}


def where_it_breaks(project: Project, lock: Lock, pending: dict[Path, bytes], worst: Worst) -> str:
    """Where a build refused as broken first parts from onnxruntime: the first layer of the
    toolkit's per-layer analysis whose accumulated cosine is below the floor that means broken
    (`lock`'s two measurements leave the analysis out; it runs once, for a refusal). Empty where
    the backend has no analysis or it names no such layer; the reason if it fails to run."""
    model = lock.model(worst.model)
    backend, target = place_parts(worst.where)
    if model is None or not target:
        return ""
    context = VerifyContext(project, lock, locate_divergence=True)
    inputs = _pending_arrays(project, pending).get(model.fixtures.path)
    if inputs is not None:  # the analysis feeds the fixtures, which the lock has not written yet
        context.seed_tensors(model.fixtures, _load(inputs))
    try:
        layers = context.analyse(model, backend, target)
    except BaselineError as error:
        return f"the toolkit's per-layer analysis could not run: {one_line(first_line(str(error)))}"
    layer = first_divergent_layer(layers, MEASURED_COSINE_FLOOR)
    if layer is None:
        return ""
    found = f"first layer below cosine {MEASURED_COSINE_FLOOR:g}: {layer.line()}"
    if layer.op not in COMPARISONS:
        return found
    onnx_path = project.pinned(model.onnx, f"models.{model.name}.onnx")
    cut = _cut_before(onnx_path, layer.name, broken_output=worst.key.partition(":")[0])
    names = ", ".join(f'"{one_line(name)}"' for name in cut) if cut else "...its inputs..."
    # MLSD (keijiro's Barracuda export) masks its scores with Equal(MaxPool(x), x): fp16 rounds
    # neighbours together and finds other peaks (cosine 0.38); built up to the mask, it locked
    return (
        f"{found} (a comparison flips where the build rounds its inputs apart or together: build "
        f"up to its inputs, [models.conversion.load_onnx] outputs = [{names}], and compare on the CPU)"
    )


COMPARISONS = frozenset({"Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"})
"""Ops whose output jumps where their inputs cross: any rounding near a tie changes it."""


def _cut_before(onnx_path: Path, tensor: str, broken_output: str) -> list[str]:
    """The inputs of the node that writes `tensor` (the analysis names a layer by its output, with
    the toolkit's `:0` suffix where the graph has none), then the graph's outputs but the broken
    one: what a build that stops before the comparison returns."""
    import onnx  # only for a refused build

    try:
        graph = onnx.load(str(onnx_path), load_external_data=False).graph
    except (OSError, ValueError, onnx.onnx_cpp2py_export.checker.ValidationError):
        return []
    names = {tensor, tensor.removesuffix(":0")}
    node = next((n for n in graph.node if names & set(n.output)), None)
    if node is None:
        return []
    kept = [output.name for output in graph.output if output.name != broken_output]
    return list(dict.fromkeys([*(name for name in node.input if name), *kept]))


def _seed(context: VerifyContext, model: ModelLock, arrays: dict[str, bytes]) -> None:
    for reference in model.references:
        data = arrays.get(reference.tensors.path)
        if data is None:  # a pinned file the lock kept: the verification reads it from disk
            continue
        tensors = _load(data)
        context.seed_tensors(reference.tensors, tensors)
        context.seed(model.name, reference.backend, reference.target, BackendRun(outputs=tensors))


def _load(data: bytes) -> TensorSet:
    with np.load(io.BytesIO(data), allow_pickle=False) as loaded:
        return {name: loaded[name] for name in loaded.files}


# ---------------------------------------------------------------- proposals


@dataclass(frozen=True)
class Worst:
    """The worst agreement of one output or part (its channels included) in one result."""

    model: str
    key: str
    table: ToleranceTable
    where: str
    cosine: float | None
    mismatch_ratio: float
    max_abs: float | None
    min_cosine: float
    max_mismatch_ratio: float | None


def worst_agreements(lock: Lock, results: Iterable[GateResult]) -> list[Worst]:
    """Per consistency result and tolerance key (a part's channels count towards their part)."""
    worst: dict[tuple[str, str, str], Worst] = {}
    for result in results:
        if result.gate != "consistency" or not isinstance(result.metrics, ConsistencyMetrics):
            continue
        model = lock.model(result.model)
        assert model is not None
        table: ToleranceTable = "consistency_quantized" if model.quantized(result.target) else "consistency"
        for name, agreement in result.metrics.outputs.items():
            key = (result.model, tolerance_key(name), result.where)
            worst[key] = _worse(worst.get(key), _worst(result, key[1], table, agreement))
    return list(worst.values())


def _worst(result: GateResult, key: str, table: ToleranceTable, agreement: OutputAgreement) -> Worst:
    cosine = agreement.judged_cosine
    cosine = cosine if cosine is not None and math.isfinite(cosine) else None
    return Worst(
        result.model,
        key,
        table,
        place_label(result.backend, result.target),
        cosine,
        agreement.mismatch_ratio,
        agreement.max_abs,
        agreement.min_cosine,
        agreement.max_mismatch_ratio,
    )


def _worse(a: Worst | None, b: Worst) -> Worst:
    if a is None:
        return b
    cosines = [c for c in (a.cosine, b.cosine) if c is not None]
    absolutes = [m for m in (a.max_abs, b.max_abs) if m is not None]
    return Worst(
        a.model,
        a.key,
        a.table,
        a.where if a.mismatch_ratio >= b.mismatch_ratio else b.where,
        min(cosines) if cosines else None,
        max(a.mismatch_ratio, b.mismatch_ratio),
        max(absolutes) if absolutes else None,
        a.min_cosine,
        a.max_mismatch_ratio,
    )


def proposals_to_pass(lock: Lock, results: list[GateResult]) -> list[ToleranceProposal]:
    """For every failing consistency result: the values of the failing limits that would pass."""
    failing = [r for r in results if r.status == Status.FAIL]
    return [
        proposal
        for worst in worst_agreements(lock, failing)
        for proposal in tolerances_that_pass(
            model=worst.model,
            key=worst.key,
            table=worst.table,
            where=worst.where,
            cosine=worst.cosine,
            mismatch_ratio=worst.mismatch_ratio,
            min_cosine=worst.min_cosine,
            max_mismatch_ratio=worst.max_mismatch_ratio,
        )
    ]


def calibrate(
    lock: Lock,
    runs: list[list[GateResult]],
    samples: dict[str, int],
    margin: float,
    spread: Sequence[list[GateResult]] = (),
) -> Calibration:
    """Tolerances with `margin` headroom over the worst agreement seen in any run (reconversion);
    `spread`: task results of later runs against the first as locked (see `against_first`)."""
    worst = worst_agreements(lock, [result for results in runs for result in results])
    entries = []
    for w in worst:
        model = lock.model(w.model)
        assert model is not None
        cosine = 1.0 if w.cosine is None else w.cosine
        proposed_cosine, proposed_ratio = with_headroom(w.cosine, w.mismatch_ratio, margin)
        refused = None
        if proposed_cosine < MIN_PROPOSED_COSINE:
            refused = f"cosine {cosine:.6f} is a broken build, not a spread (floor {MIN_PROPOSED_COSINE:g})"
            proposed_cosine = MIN_PROPOSED_COSINE
        entries.append(
            CalibrationEntry(
                model=w.model,
                key=w.key,
                table=w.table,
                where=w.where,
                onnx_sha256=model.onnx.sha256,
                cosine=w.cosine,
                mismatch_ratio=w.mismatch_ratio,
                max_abs=w.max_abs,
                proposed_min_cosine=proposed_cosine,
                refused=refused,
                proposed_max_mismatch_ratio=proposed_ratio,
            )
        )
    tasks = calibrate_tasks(lock, [result for results in [*runs, *spread] for result in results], margin)
    return Calibration(runs=len(runs), samples=samples, margin=margin, entries=entries, tasks=tasks)


def proposed_intent(calibration: Calibration) -> str:
    """The calibrated values as intent tables to paste under each model's `[[models]]`."""
    by_table: dict[tuple[str, str, str], list[CalibrationEntry]] = {}
    for entry in calibration.entries:
        by_table.setdefault((entry.model, entry.key, entry.table), []).append(entry)
    blocks = []
    for (model, key, table), entries in by_table.items():
        cosine = min(entry.proposed_min_cosine for entry in entries)
        ratio = max(entry.proposed_max_mismatch_ratio for entry in entries)
        measured = ", ".join(
            f"{e.where}: cosine {_g(e.cosine)}, {e.mismatch_ratio:.4%} beyond tolerance" for e in entries
        )
        blocks += [
            f"# model {model}: {key} on {e.where}: not calibrated, {e.refused}; fix the build, or "
            f"declare it in [[models.expect_fail]]"
            for e in entries
            if e.refused
        ]
        blocks.append(
            f"# model {model}: worst of {calibration.runs} run(s) × {calibration.samples.get(model, 0)} "
            f"sample(s), ×{calibration.margin:g} headroom; measured {measured}\n"
            f'[models.tolerances.outputs."{key}".{table}]\n'
            f"min_cosine = {cosine:g}\nmax_mismatch_ratio = {ratio:g}\n"
        )
    return "\n".join(blocks + _task_blocks(calibration))


def _task_blocks(calibration: Calibration) -> list[str]:
    """Task thresholds the measurement does not meet, as lines to set in each `[[models.tasks]]`
    (against the locked outputs) or in its `[models.tasks.golden*]` table (against onnxruntime)."""
    by_table: dict[tuple[str, int, str], list[TaskThresholdEntry]] = {}
    refused = [
        f"# model {e.model}: {task_key(e.task, e.kind, e.output, e.table)} {e.field} not calibrated: "
        f"{e.refused}, measured on {e.where}"
        for e in calibration.tasks
        if e.refused
    ]
    for entry in calibration.tasks:
        if entry.proposed != entry.current:
            by_table.setdefault((entry.model, entry.task, entry.table), []).append(entry)
    return [
        f"# model {model}: in {task_key(task, entries[0].kind, entries[0].output, entries[0].table)}, "
        f"worst of {calibration.runs} run(s), ×{calibration.margin:g} headroom; "
        + "; ".join(f"{e.field} measured {e.measured:.6g} on {e.where}{_floored(e)}" for e in entries)
        + "\n"
        + ("" if table == "task" else f"[models.tasks.{table}]\n")
        + "".join(f"{e.field} = {threshold_text(e.field, e.proposed)}\n" for e in entries)
        for (model, task, table), entries in by_table.items()
    ] + refused


def _g(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.6f}"


def calibrated_intent(intent: dict[str, Any], calibration: Calibration) -> dict[str, Any]:
    """`intent` (as parsed from the TOML) with every value `calibration` proposed written where
    `verify` reads it: consistency tolerances per output/part and target kind, task thresholds in
    their `[[models.tasks]]`. Refused proposals (a broken build) are left out."""
    calibrated = copy.deepcopy(intent)
    models = {model["name"]: model for model in calibrated.get("models", [])}
    for entry in calibration.entries:
        outputs = models[entry.model].setdefault("tolerances", {}).setdefault("outputs", {})
        table = outputs.setdefault(entry.key, {}).setdefault(entry.table, {})
        table["min_cosine"] = min(table.get("min_cosine", 1.0), entry.proposed_min_cosine)
        ratio = max(table.get("max_mismatch_ratio", 0.0), entry.proposed_max_mismatch_ratio)
        table["max_mismatch_ratio"] = ratio
    for task in calibration.tasks:
        if task.proposed != task.current and not task.refused:
            value = bool(task.proposed) if task.field == "require_equal_text" else task.proposed
            spec = models[task.model]["tasks"][task.task]
            table = spec if task.table == "task" else spec.setdefault(task.table, {})
            table[task.field] = value
    return calibrated


def _floored(entry: TaskThresholdEntry) -> str:
    """Said where the headroom on a measurement would pass the floor that means broken, and the
    proposal stops there (the measurement itself is above it)."""
    at_floor = (lower_bound(entry.field) or entry.field in BROKEN_ABOVE) and entry.proposed == BROKEN_BEYOND
    return f" (headroom stops at {BROKEN_BEYOND:g}, the limit of a working build)" if at_floor else ""
