"""`baseline verify`: rerun every gate of every model in the lock and collect the results."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from baseline.backends import SIMULATOR
from baseline.cache import FileHashes, ResultCache, cache_root, result_key
from baseline.errors import ConfigError
from baseline.gates import GATES, GateJob, VerifyContext, run_gate
from baseline.gates.integrity import pinned_files
from baseline.intent import intent_hash, load_intent
from baseline.lockfile import load_lock
from baseline.models.lock import Lock, ModelLock
from baseline.models.results import GateResult, Report
from baseline.project import Project
from baseline.toolchain.provision import Progress, ensure_toolchains, find_toolchain
from baseline.versions import host_toolchain

JobProgress = Callable[[int, int, str], None]
"""Called before each gate job (done, total, label) and once more when all are done."""


@dataclass
class VerifyOptions:
    use_cache: bool = True
    jobs: int = 1
    """Models verified in parallel (threads; each toolkit job borrows its own worker)."""
    executor: str = "local"
    """`local` (threads, above) or `ray`: one Ray task per model (baseline/executors/ray_executor.py)."""
    address: str | None = None
    """With `ray`: the cluster to join; None starts a local one."""


def verify_project(
    project: Project,
    only: list[str] | None = None,
    progress: Progress | None = None,
    on_job: JobProgress | None = None,
    options: VerifyOptions | None = None,
) -> Report:
    """Check the lock is usable, then run the gates. Bad input raises; failed gates are results."""
    options = options or VerifyOptions()
    lock = load_lock(project.lock_path)
    _check_fresh(project, lock)
    models = select_models(project, lock, only)
    for model in models:
        _check_files_exist(project, model)
    ensure_toolchains({m.toolkit.version for m in models if SIMULATOR in m.backends}, progress)
    root = cache_root(project.root)
    ctx = VerifyContext(project=project, lock=lock, hashes=FileHashes(root / "file-hashes.json"))
    tracker = _Tracker(on_job, len(plan(models)))
    cache = ResultCache(root / "results") if options.use_cache else None
    # --- executor dispatch: Ray (imported only when chosen) or local threads ---
    if options.executor == "ray":
        from baseline.executors.ray_executor import verify_models

        per_model = verify_models(project, models, options, tracker.advance)
    else:
        with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
            per_model = list(pool.map(lambda model: _verify_model(ctx, model, cache, tracker), models))
    # --- end of executor dispatch ---
    ctx.hashes.save()
    tracker.finish()
    return Report(
        lock=str(project.lock_path), results=[result for results in per_model for result in results]
    )


def _verify_model(
    ctx: VerifyContext, model: ModelLock, cache: ResultCache | None, tracker: _Tracker
) -> list[GateResult]:
    jobs = plan([model])
    key = result_key(_dependencies(ctx, model)) if cache is not None else ""
    cached = cache.get(key) if cache is not None else None
    if cached is not None:
        tracker.advance(len(jobs), f"{model.name} (cached)")
        return cached
    results = []
    for model_, gate, job in jobs:
        tracker.advance(0, _label(model_, gate, job))
        results.append(run_gate(gate, model_, job, ctx))
        tracker.advance(1, _label(model_, gate, job))
    if cache is not None:
        cache.put(key, results)
    return results


def _dependencies(ctx: VerifyContext, model: ModelLock) -> dict[str, Any]:
    """Everything a model's gate results depend on, by content."""
    files = {key: ctx.hashes.sha256(ctx.project.pinned(pin, key)) for key, pin in pinned_files(model)}
    toolchain = find_toolchain(model.toolkit.version) if SIMULATOR in model.backends else None
    return {
        "model": model.model_dump(mode="json"),
        "files": files,
        "captures": _capture_hashes(ctx, model),
        "toolkit": toolchain.packages if toolchain is not None else None,
        "host": host_toolchain().model_dump(),
        "boards": [board.model_dump() for board in ctx.lock.boards],
        "matrix": [cell.model_dump() for cell in ctx.lock.matrix if cell.model == model.name],
        "toolkits": [pin.model_dump() for pin in ctx.lock.toolkits],
    }


def _capture_hashes(ctx: VerifyContext, model: ModelLock) -> dict[str, str]:
    """On-board captures are inputs too: a new capture must rerun the rknnlite gates."""
    if "rknnlite" not in model.backends:
        return {}
    folder = ctx.project.resolve(ctx.lock.captures, "captures") / model.name
    return (
        {
            p.relative_to(folder).as_posix(): ctx.hashes.sha256(p)
            for p in sorted(folder.rglob("*"))
            if p.is_file()
        }
        if folder.is_dir()
        else {}
    )


class _Tracker:
    """Thread-safe progress counting for parallel models."""

    def __init__(self, on_job: JobProgress | None, total: int) -> None:
        self.on_job, self.total, self.done = on_job, total, 0
        self._lock = threading.Lock()

    def advance(self, count: int, label: str) -> None:
        with self._lock:
            self.done += count
            if self.on_job is not None:
                self.on_job(self.done, self.total, label)

    def finish(self) -> None:
        if self.on_job is not None:
            self.on_job(self.total, self.total, "done")


def _label(model: ModelLock, gate: ModuleType, job: GateJob) -> str:
    where = "/".join(part for part in (job.backend, job.target) if part)
    return f"{model.name} {gate.NAME}" + (f" [{where}]" if where else "")


def plan(models: list[ModelLock]) -> list[tuple[ModelLock, ModuleType, GateJob]]:
    """Every (model, gate, job) a verification runs, in running order."""
    return [(model, gate, job) for model in models for gate in GATES for job in gate.jobs(model)]


def _check_fresh(project: Project, lock: Lock) -> None:
    current = intent_hash(load_intent(project.intent_path))
    if current != lock.inputs_hash:
        raise ConfigError(
            f"{project.lock_path}: lock is stale, {project.intent_path} changed since it was "
            f"written; run `baseline lock --lock {project.lock_path}`"
        )


def select_models(project: Project, lock: Lock, only: list[str] | None) -> list[ModelLock]:
    if not only:
        return lock.models
    unknown = [name for name in only if lock.model(name) is None]
    if unknown:
        known = ", ".join(model.name for model in lock.models)
        raise ConfigError(f"{project.lock_path}: no model named {unknown[0]!r}; the lock has {known}")
    return [model for model in lock.models if model.name in only]


def _check_files_exist(project: Project, model: ModelLock) -> None:
    for key, pin in pinned_files(model):
        path = project.pinned(pin, f"models.{model.name}.{key}")
        if not path.is_file():
            raise ConfigError(
                f"{project.lock_path}: models.{model.name}.{key}: {pin.path} is missing; "
                "restore it, or run `baseline lock` if it was removed on purpose"
            )
