"""`baseline verify`: rerun every gate of every model in the lock and collect the results."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from baseline.backends import SIMULATOR
from baseline.errors import ConfigError
from baseline.gates import GATES, GateJob, VerifyContext, run_gate
from baseline.gates.integrity import pinned_files
from baseline.intent import intent_hash, load_intent
from baseline.locker import ensure_toolchains
from baseline.lockfile import load_lock
from baseline.models.lock import Lock, ModelLock
from baseline.models.results import Report
from baseline.project import Project
from baseline.toolchain.provision import Progress

JobProgress = Callable[[int, int, str], None]
"""Called before each gate job (done, total, label) and once more when all are done."""


def verify_project(
    project: Project,
    only: list[str] | None = None,
    progress: Progress | None = None,
    on_job: JobProgress | None = None,
) -> Report:
    """Check the lock is usable, then run the gates. Bad input raises; failed gates are results."""
    lock = load_lock(project.lock_path)
    _check_fresh(project, lock)
    models = select_models(project, lock, only)
    for model in models:
        _check_files_exist(project, model)
    ensure_toolchains({m.toolkit.version for m in models if SIMULATOR in m.backends}, progress)
    ctx = VerifyContext(project=project, lock=lock)
    jobs = plan(models)
    results = []
    for done, (model, gate, job) in enumerate(jobs):
        if on_job is not None:
            on_job(done, len(jobs), _label(model, gate, job))
        results.append(run_gate(gate, model, job, ctx))
    if on_job is not None:
        on_job(len(jobs), len(jobs), "done")
    return Report(lock=str(project.lock_path), results=results)


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
