"""`baseline matrix`: the same models converted and simulated by several toolkit versions.

Each toolkit runs in its own pinned environment. A cell records whether the model
compiled, how close the simulator is to the locked onnxruntime golden, and how far its
statistics are from the locked simulator baseline. `first_changes` is the bisect view:
for each model and target, the first toolkit version whose result differs from the one
before it.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

from packaging.version import Version

from baseline.backends import GOLDEN, SIMULATOR, BackendRun, get_backend
from baseline.compare import compare_tensors, stat_deltas, tensor_stats
from baseline.executors import ExecutorOptions, Task, run_tasks
from baseline.gates.context import VerifyContext
from baseline.models.lock import Lock, MatrixCell, ModelLock
from baseline.models.tensors import TensorStats
from baseline.models.tolerances import DriftTolerance
from baseline.toolchain.provision import Progress, ensure_toolchains


@dataclass(frozen=True)
class ToolkitChange:
    """Where a model's result on a target first changed between consecutive toolkit versions."""

    model: str
    target: str
    before: str
    after: str
    what: str


@dataclass
class MatrixResult:
    toolkits: list[str]
    cells: list[MatrixCell]
    changes: list[ToolkitChange]


def run_matrix(
    ctx: VerifyContext,
    toolkits: list[str],
    models: list[ModelLock],
    progress: Progress | None = None,
    options: ExecutorOptions | None = None,
) -> MatrixResult:
    """One job per toolkit version × model × target, run by the executor (threads, or Ray)."""
    ordered = sorted(set(toolkits), key=Version)
    ensure_toolchains(set(ordered), progress)
    tasks = [
        Task(
            name=f"matrix {model.name} {target.name} toolkit {version}",
            call=measure_cell,
            args=(ctx.for_model(model.name), model.name, target.name, version),
            owner=f"model {model.name!r} on {target.name} with toolkit {version}",
        )
        for version in ordered
        for model in models
        if SIMULATOR in model.backends
        for target in model.targets
    ]

    def finished(index: int, measured: tuple[MatrixCell, list[TensorStats]], seconds: float) -> None:
        if progress is not None:
            progress(f"{tasks[index].name.removeprefix('matrix ')} ({seconds:.1f} s)")

    measured: list[tuple[MatrixCell, list[TensorStats]]] = run_tasks(
        tasks, options or ExecutorOptions(), finished
    )
    cells = [cell for cell, _ in measured]
    stats = {(cell.toolkit, cell.model, cell.target): outputs for cell, outputs in measured}
    return MatrixResult(ordered, cells, first_changes(ordered, cells, stats, ctx.lock))


def measure_cell(
    ctx: VerifyContext, model_name: str, target: str, version: str
) -> tuple[MatrixCell, list[TensorStats]]:
    """One cell: convert and simulate with toolkit `version`. Runs in a local thread or a Ray worker."""
    ensure_toolchains({version}, None)  # a Ray node provisions what it runs, once
    model = ctx.lock.model(model_name)
    assert model is not None, model_name
    job = ctx.job(model, target)
    job = dataclasses.replace(job, toolkit=model.toolkit.model_copy(update={"version": version}))
    run = get_backend(SIMULATOR).run(job)
    build = run.build
    metadata = build.metadata if build is not None else None
    outputs = [tensor_stats(name, array) for name, array in (run.outputs or {}).items()]
    cell = MatrixCell(
        toolkit=version,
        model=model.name,
        target=target,
        compiled=bool(build and build.compiled),
        stage=build.stage if build else "error",
        error=(run.error or "").splitlines()[0][:300] or None if not run.ok else None,
        format_version=metadata.format_version if metadata else None,
        compiler_version=metadata.compiler_version if metadata else None,
        fingerprint=metadata.fingerprint if metadata else None,
        **_numbers(ctx, model, target, run, outputs),
    )
    return cell, outputs


def _numbers(
    ctx: VerifyContext, model: ModelLock, target: str, run: BackendRun, outputs: list[TensorStats]
) -> dict[str, object]:
    if run.outputs is None:
        return {}
    golden_pin = model.reference(GOLDEN, None)
    comparisons = []
    if golden_pin is not None:
        golden = ctx.tensors(golden_pin.tensors, f"models.{model.name}.references.{GOLDEN}")
        comparisons = [
            compare_tensors(n, run.outputs[n], golden[n], 0.0, 0.0) for n in golden if n in run.outputs
        ]
    cosines = [c.cosine for c in comparisons if c.cosine is not None]
    absolute = [c.max_abs for c in comparisons if c.max_abs is not None]
    return {
        "min_cosine": min(cosines) if cosines else None,
        "max_abs": max(absolute) if absolute else None,
        "non_finite": sum(s.nan + s.inf for s in outputs),
        "drift_ratio": _drift_ratio(model, model.reference(SIMULATOR, target), outputs),
    }


def _drift_ratio(model: ModelLock, reference: object, outputs: list[TensorStats]) -> float | None:
    baseline = {s.name: s for s in getattr(reference, "outputs", [])}
    ratios = [
        delta.ratio
        for stats in outputs
        if stats.name in baseline
        for delta in stat_deltas(baseline[stats.name], stats, _drift_tolerance(model, stats.name))
    ]
    return max(ratios) if ratios else None


def _drift_tolerance(model: ModelLock, output: str) -> DriftTolerance:
    pinned = model.tolerances.get(output)
    return pinned.drift if pinned is not None else DriftTolerance()


def first_changes(
    toolkits: list[str],
    cells: list[MatrixCell],
    stats: dict[tuple[str, str, str], list[TensorStats]],
    lock: Lock,
) -> list[ToolkitChange]:
    by_key = {(c.toolkit, c.model, c.target): c for c in cells}
    changes = []
    for model, target in dict.fromkeys((c.model, c.target) for c in cells):
        versions = [v for v in toolkits if (v, model, target) in by_key]
        for before, after in itertools.pairwise(versions):
            what = _difference(
                by_key[(before, model, target)],
                by_key[(after, model, target)],
                stats[(before, model, target)],
                stats[(after, model, target)],
                lock.model(model),
            )
            if what:
                changes.append(ToolkitChange(model, target, before, after, what))
                break
    return changes


def _difference(
    old: MatrixCell,
    new: MatrixCell,
    old_stats: list[TensorStats],
    new_stats: list[TensorStats],
    model: ModelLock | None,
) -> str | None:
    if old.compiled != new.compiled:
        return "started to compile" if new.compiled else f"stopped compiling: {new.error}"
    if old.non_finite != new.non_finite:
        return f"NaN/Inf outputs {old.non_finite} → {new.non_finite}"
    previous = {s.name: s for s in old_stats}
    for stats in new_stats:
        if stats.name not in previous or model is None:
            continue
        moved = [
            d
            for d in stat_deltas(previous[stats.name], stats, _drift_tolerance(model, stats.name))
            if d.exceeded
        ]
        if moved:
            d = moved[0]
            return f"output {stats.name!r} {d.statistic} {d.baseline:.6g} → {d.candidate:.6g}"
    return None
