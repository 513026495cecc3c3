"""`baseline verify`: rerun every gate of every model in the lock and collect the results.

The work is cut into jobs: one model's gate checks that share a backend run on one target (and
so one toolkit version) — `classifier rknn-sim/rk3588` runs compilable, artifact, consistency
and drift on the simulator's single run; `classifier checks/rk3588` runs static and compat,
which need no backend; `classifier checks` runs integrity. Each job has its own cache key over
what it reads, so a change to one target reruns only that target's jobs; cached jobs are
answered here, the rest go to an executor (threads, or Ray), longest first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from baseline.backends import capabilities, uses_toolkit
from baseline.cache import (
    FileHashes,
    JobTimes,
    ParsedLock,
    ResultCache,
    cache_root,
    ignore_in_git,
    model_json,
    result_key,
    untrusted_cache_warning,
)
from baseline.capture import capture_dir, capture_files
from baseline.errors import ConfigError
from baseline.executors import ExecutorOptions, Task, run_tasks
from baseline.gates import GATES, GateJob, VerifyContext, declared_reads, run_gate
from baseline.gates.contract import Reads, calibration_files, matrix_cells, model_view, pinned_files
from baseline.hashing import sha256_bytes
from baseline.intent import intent_hash, load_intent
from baseline.lockcheck import check_lock_follows_intent
from baseline.lockfile import load_lock
from baseline.models.lock import Lock, ModelLock
from baseline.models.results import GateResult, Report
from baseline.noise import noise_warnings
from baseline.paths import RESULTS_FOLDER
from baseline.project import Project
from baseline.toolchain.provision import Progress, ensure_toolchains, find_toolchain
from baseline.versions import host_toolchain

JobProgress = Callable[[int, int, str], None]
"""Called as jobs finish (gate checks done, total, label) and once more when all are done."""


@dataclass(frozen=True)
class VerifyOptions(ExecutorOptions):
    use_cache: bool = True


@dataclass(frozen=True)
class VerifyJob:
    """One model's gate checks that share a backend (or none) and a target."""

    model: str
    backend: str | None
    """None: the checks that run no backend (integrity; static and compat per target)."""
    target: str | None
    toolkit: str | None
    """The toolkit version the job's backend runs (None for onnxruntime and backend-free checks)."""
    checks: tuple[GateJob, ...]

    @property
    def label(self) -> str:
        where = "/".join(part for part in (self.backend or "checks", self.target) if part)
        return f"{self.model} {where}"


def verify_project(
    project: Project,
    only: list[str] | None = None,
    progress: Progress | None = None,
    on_job: JobProgress | None = None,
    options: VerifyOptions | None = None,
) -> Report:
    """Check the lock is usable, then run the gates. Bad input raises; failed gates are results."""
    options = options or VerifyOptions()
    project.forget_paths()
    root = cache_root(project.root)
    distrust = untrusted_cache_warning(project.root, root) if options.use_cache else None
    use_cache = options.use_cache and distrust is None
    lock = load_lock(project.lock_path, ParsedLock(root, project.lock_path, read=use_cache))
    _check_fresh(project, lock)
    models = select_models(project, lock, only)
    for model in models:
        _check_files_exist(project, model)
    ensure_toolchains(_toolkit_versions(models), progress)
    ignore_in_git(root)
    # --no-cache trusts nothing a previous run left, remembered file hashes included, and
    # stores what it measures (as pytest's --cache-clear), so the next run is answered from it
    hashes = FileHashes(root / "file-hashes.json", read=use_cache)
    ctx = VerifyContext(project=project, lock=lock, hashes=hashes)
    cache = ResultCache(root / RESULTS_FOLDER, read=use_cache)
    batch = sha256_bytes(str(project.lock_path.resolve()).encode())[:16]  # one per lock file
    cache.preload(batch)
    times = JobTimes(root / "job-times.json")
    results = run_jobs(ctx, plan_jobs(models), options, cache, on_job, times)
    if not only:  # a run of a few models keeps the batch of the whole lock as it is
        cache.save_batch(batch, list(cache.keys_used))
    ctx.hashes.save()
    warnings = [
        *([distrust] if distrust else []),
        *(line for model in models for line in noise_warnings(model)),
    ]
    return Report(lock=str(project.lock_path), results=_in_plan_order(models, results), warnings=warnings)


def run_jobs(
    ctx: VerifyContext,
    jobs: list[VerifyJob],
    options: ExecutorOptions,
    cache: ResultCache | None,
    on_job: JobProgress | None = None,
    times: JobTimes | None = None,
) -> list[GateResult]:
    """Answer cached jobs here, run the others on the executor (longest first, by `times`),
    store what they return."""
    tracker = _Tracker(on_job, sum(len(job.checks) for job in jobs))
    shared = _lock_wide_dependencies(ctx) if cache is not None else {}
    keys = [result_key(job_dependencies(ctx, job, shared)) if cache is not None else "" for job in jobs]
    answered: dict[int, list[GateResult]] = {}
    for position, job in enumerate(jobs):
        cached = cache.get(keys[position]) if cache is not None else None
        if cached is not None:
            answered[position] = cached
            tracker.advance(len(job.checks), f"{job.label} (cached)")
    todo = _longest_first([p for p in range(len(jobs)) if p not in answered], jobs, times)
    if todo and options.executor == "local":
        _prestart([jobs[position] for position in todo], options.jobs)

    def finished(index: int, results: list[GateResult], seconds: float) -> None:
        position = todo[index]
        answered[position] = results
        if cache is not None:
            cache.put(keys[position], results)
        if times is not None:
            times.record(jobs[position].label, seconds)
        tracker.advance(len(jobs[position].checks), jobs[position].label)

    try:
        run_tasks(job_tasks(ctx, [jobs[position] for position in todo]), options, finished)
    finally:
        if times is not None and todo:
            times.save()
    tracker.finish()
    return [result for position in range(len(jobs)) for result in answered[position]]


def _prestart(todo: list[VerifyJob], parallel: int) -> None:
    """The ONNX helper and the toolkit workers the jobs will borrow start now: their imports
    (onnxruntime ~1 s, the toolkit ~1.5-2 s) run while the first jobs start."""
    from baseline.isolated import HELPERS

    HELPERS.prestart()
    versions: dict[str, int] = {}
    for job in todo:
        if job.backend is not None and job.toolkit is not None and capabilities(job.backend).uses_toolkit:
            versions[job.toolkit] = min(versions.get(job.toolkit, 0) + 1, parallel)
    if versions:
        from baseline.backends.rknn_sim import prestart_workers

        prestart_workers(versions)


def _longest_first(todo: list[int], jobs: list[VerifyJob], times: JobTimes | None) -> list[int]:
    """Jobs never timed first (they may be long), then by their last duration, longest first."""
    if times is None:
        return todo

    def last(position: int) -> float:
        seconds = times.estimate(jobs[position].label)
        return float("inf") if seconds is None else seconds

    return sorted(todo, key=last, reverse=True)


def job_tasks(ctx: VerifyContext, jobs: list[VerifyJob]) -> list[Task]:
    """The executor's view of the jobs: each carries a context narrowed to its own model."""
    return [
        Task(
            name=f"verify {job.label}",
            call=run_job,
            args=(ctx.for_model(job.model), job),
            resources=board_resources(ctx.lock, job),
            owner=f"model {job.model!r} ({job.backend} on {job.target})",
        )
        for job in jobs
    ]


def run_job(ctx: VerifyContext, job: VerifyJob) -> list[GateResult]:
    """Run one job's gate checks. The same call runs in a local thread or a Ray worker."""
    if job.toolkit is not None:
        ensure_toolchains({job.toolkit}, None)  # a Ray node provisions what it runs, once
    model = ctx.lock.model(job.model)
    if model is None:
        raise ConfigError(f"{ctx.project.lock_path}: no model named {job.model!r}")
    return [run_gate(model, check, ctx) for check in job.checks]


def plan_jobs(models: list[ModelLock]) -> list[VerifyJob]:
    """Every job of a verification: the plan's gate checks grouped by model, backend and target."""
    groups: dict[tuple[str, str | None, str | None], tuple[ModelLock, list[GateJob]]] = {}
    for model, check in plan(models):
        groups.setdefault((model.name, check.backend, check.target), (model, []))[1].append(check)
    return [
        VerifyJob(name, backend, target, _toolkit_of(model, backend), tuple(checks))
        for (name, backend, target), (model, checks) in groups.items()
    ]


def plan(models: list[ModelLock]) -> list[tuple[ModelLock, GateJob]]:
    """Every gate check a verification runs, in the order the report lists them."""
    return [(model, check) for model in models for gate in GATES for check in gate.jobs(model)]


def board_resources(lock: Lock, job: VerifyJob) -> dict[str, float]:
    """What a job needs from the cluster: one unit of its board's platform (a board runs one
    model at a time) for board backends; nothing for the simulator and onnxruntime."""
    model = lock.model(job.model)
    if (
        job.backend is None
        or not capabilities(job.backend).needs_board
        or job.target is None
        or model is None
    ):
        return {}
    return {model.target(job.target).platform: 1.0}


def _toolkit_of(model: ModelLock, backend: str | None) -> str | None:
    return model.toolkit.version if backend is not None and capabilities(backend).uses_toolkit else None


def _toolkit_versions(models: list[ModelLock]) -> set[str]:
    return {model.toolkit.version for model in models if uses_toolkit(model.backends)}


def _in_plan_order(models: list[ModelLock], results: list[GateResult]) -> list[GateResult]:
    """Results as a model-by-model run would list them, however the jobs were grouped."""
    order = {(model.name, c.gate, c.backend, c.target): i for i, (model, c) in enumerate(plan(models))}
    return sorted(results, key=lambda r: order[(r.model, r.gate, r.backend, r.target)])


def _lock_wide_dependencies(ctx: VerifyContext) -> dict[str, Any]:
    """What every job's key shares, read once per verify rather than once per job: looking up
    the host's package versions takes ~0.9 ms, ~70 ms over the 80 jobs of a 20-model lock."""
    return {
        "host": host_toolchain().model_dump(),
        "boards": [board.model_dump() for board in ctx.lock.boards],
        "toolkits": [pin.model_dump() for pin in ctx.lock.toolkits],
    }


def job_dependencies(ctx: VerifyContext, job: VerifyJob, shared: dict[str, Any]) -> dict[str, Any]:
    """Everything a job's results depend on, by content: what its gates declare they read
    (`Reads`), and what the backend runs they read take in, by the backends' capabilities.
    Other targets' files are left out. `shared` is `_lock_wide_dependencies(ctx)`."""
    model = ctx.lock.model(job.model)
    assert model is not None
    # one narrowed copy of the entry per (backend, target): a pydantic copy per check was ~8,000
    # copies in a cached verify of 1,000 models
    views: dict[tuple[str | None, str | None], ModelLock] = {}

    def view(backend: str | None, target: str | None) -> ModelLock:
        if (backend, target) not in views:
            views[(backend, target)] = model_view(model, backend, target)
        return views[(backend, target)]

    reads = Reads.union(declared_reads(view(c.backend, c.target), c) for c in job.checks)
    reads = reads | Reads.union(
        _run_reads(model, backend, target) for backend, target in sorted(reads.runs, key=str)
    )
    pins = pinned_files(model)
    toolchain = find_toolchain(model.toolkit.version) if reads.toolkit_environment else None
    return {
        "job": [job.backend, job.target, [check.gate for check in job.checks]],
        "model": model_json(view(job.backend, job.target)),
        "files": {
            key: ctx.hashes.sha256(ctx.project.pinned(pins[key], key), pins[key].size)
            for key in sorted(reads.files)
        },
        "captures": _capture_hashes(ctx, model, reads),
        "toolkit": toolchain.packages if toolchain is not None else None,
        "host": shared["host"],
        **{section: shared[section] for section in ("boards", "toolkits") if section in reads.lock},
        "matrix": _matrix_cells(ctx, model, job.target) if "matrix" in reads.lock else [],
    }


def _matrix_cells(ctx: VerifyContext, model: ModelLock, target: str | None) -> list[dict[str, Any]]:
    return [cell.model_dump() for cell in matrix_cells(ctx.lock.matrix, model.name, target)]


def _run_reads(model: ModelLock, backend: str, target: str | None) -> Reads:
    """What a backend run takes in besides the lock entry: the ONNX file and fixtures always;
    the toolkit environment, the pinned `.rknn` and the board's observed versions where its
    capabilities say so. (Captures are hashed separately, see `_capture_hashes`.)"""
    caps = capabilities(backend)
    files = {"onnx", "fixtures"}
    if caps.runs_pinned_artifact and target is not None and model.conversion(target) is not None:
        files.add(f"conversions.{target}.artifact")
    if caps.converts and target is not None and model.quantized(target):
        files |= set(calibration_files(model))  # a quantized build calibrates on them
    return Reads(
        files=frozenset(files),
        lock=frozenset({"boards"}) if caps.needs_board else frozenset(),
        toolkit_environment=caps.uses_toolkit,
    )


def _capture_hashes(ctx: VerifyContext, model: ModelLock, reads: Reads) -> dict[str, str]:
    """On-board captures are inputs too: a new capture must rerun the gates that read it.
    Only regular files inside the project are read (see `capture_files`)."""
    targets = sorted({str(t) for backend, t in reads.runs if capabilities(backend).reads_captures})
    hashes: dict[str, str] = {}
    for target in targets:
        folder = capture_dir(ctx.project, ctx.lock, model.name, target)
        hashes |= {
            p.relative_to(folder.parent).as_posix(): ctx.hashes.sha256(p)
            for p in capture_files(ctx.project, folder)
        }
    return hashes


class _Tracker:
    """Progress counting; jobs finish in any order, and executors report them in our thread."""

    def __init__(self, on_job: JobProgress | None, total: int) -> None:
        self.on_job, self.total, self.done = on_job, total, 0

    def advance(self, count: int, label: str) -> None:
        self.done += count
        if self.on_job is not None:
            self.on_job(self.done, self.total, label)

    def finish(self) -> None:
        if self.on_job is not None:
            self.on_job(self.total, self.total, "done")


def _check_fresh(project: Project, lock: Lock) -> None:
    intent = load_intent(project.intent_path)
    if intent_hash(intent) != lock.inputs_hash:
        raise ConfigError(
            f"{project.lock_path}: lock is stale, {project.intent_path} changed since it was "
            f"written; run `baseline lock --lock {project.lock_path}`"
        )
    # the hash is the lock's own claim: the rules it holds must be the intent's too
    check_lock_follows_intent(project, lock, intent)


def select_models(project: Project, lock: Lock, only: list[str] | None) -> list[ModelLock]:
    if not only:
        return lock.models
    unknown = [name for name in only if lock.model(name) is None]
    if unknown:
        known = ", ".join(model.name for model in lock.models)
        raise ConfigError(f"{project.lock_path}: no model named {unknown[0]!r}; the lock has {known}")
    return [model for model in lock.models if model.name in only]


def _check_files_exist(project: Project, model: ModelLock) -> None:
    for key, pin in pinned_files(model).items():
        path = project.pinned(pin, f"models.{model.name}.{key}")
        if not path.is_file():
            raise ConfigError(
                f"{project.lock_path}: models.{model.name}.{key}: {pin.path} is missing; "
                "restore it, or run `baseline lock` if it was removed on purpose"
            )
