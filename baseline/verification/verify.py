"""`baseline verify`: rerun every gate of every model in the lock and collect the results.

The work is cut into jobs: one model's gate checks that share a backend run on one target (and
so one toolkit version) — `classifier rknn-sim/rk3588` runs compilable, artifact, consistency
and drift on the simulator's single run; `classifier checks/rk3588` runs static and compat,
which need no backend; `classifier checks` runs integrity. Each job has its own cache key over
what it reads, so a change to one target reruns only that target's jobs; cached jobs are
answered here, the rest go to an executor (threads, or Ray), longest first.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass

from baseline.backends import capabilities
from baseline.errors import ConfigError
from baseline.executors import ExecutorOptions, Task, run_tasks
from baseline.executors.processes import can_use as can_use_processes
from baseline.executors.processes import run_in_processes
from baseline.files.hashing import sha256_bytes
from baseline.gates import GATES, GateJob, VerifyContext, run_gate
from baseline.gates.contract import pinned_files
from baseline.gates.outrank import reality_first
from baseline.models.lock import Lock, ModelLock
from baseline.models.results import GateResult, Report
from baseline.project.intent import intent_hash, load_intent
from baseline.project.layout import Project
from baseline.project.lockcheck import check_lock_follows_intent
from baseline.project.lockfile import parse_lock, read_lock_bytes
from baseline.project.paths import RESULTS_FOLDER
from baseline.runtime.progress import CACHED_SUFFIX, JobProgress
from baseline.toolchain.provision import Progress, ensure_toolchains
from baseline.verification.cache import (
    FileHashes,
    JobTimes,
    ParsedLock,
    ResultCache,
    cache_root,
    ignore_in_git,
    untrusted_cache_warning,
)
from baseline.verification.excuses import model_warnings
from baseline.verification.jobkeys import (
    KeyRecipes,
    LiveInputs,
    VerifyJob,
    key_recipe,
    lock_wide_dependencies,
)
from baseline.verification.observations import CompileObservations
from baseline.verification.runcache import RUNS_FOLDER, RunCache


@dataclass(frozen=True)
class VerifyOptions(ExecutorOptions):
    use_cache: bool = True


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
    # a cache somebody committed is read for nothing, the lock's remembered parse included
    distrust = untrusted_cache_warning(project.root, root)
    trusted = distrust is None
    use_cache = options.use_cache and trusted
    raw = read_lock_bytes(project.lock_path)
    # --no-cache still reads the lock's remembered parse and the key recipes from a trusted
    # cache: both are kept under the sha256 of the lock's exact bytes (and baseline's code) and
    # follow from those alone, and no result comes from them (the 2.5 MB lock of 1,000 models:
    # a ~0.8 s TOML parse, serial before any job of `--jobs N` can start)
    lock = parse_lock(raw, project.lock_path, ParsedLock(root, project.lock_path, read=trusted))
    _check_fresh(project, lock)
    models = select_models(project, lock, only)
    for model in models:
        _check_files_exist(project, model)
    ignore_in_git(root)
    # --no-cache trusts nothing a previous run left, remembered file hashes included, and
    # stores what it measures (as pytest's --cache-clear), so the next run is answered from it
    hashes = FileHashes(root / "file-hashes.json", read=use_cache)
    runs = RunCache(root / RUNS_FOLDER, hashes, project, read=use_cache)
    ctx = VerifyContext(project=project, lock=lock, hashes=hashes, stored_runs=runs)
    cache = ResultCache(root / RESULTS_FOLDER, read=use_cache)
    batch = sha256_bytes(str(project.lock_path.resolve()).encode())[:16]  # one per lock file
    cache.preload(batch)
    times = JobTimes(root / "job-times.json")
    recipes = KeyRecipes(root / "batches" / f"recipes-{batch}.json", sha256_bytes(raw), read=trusted)
    checks = plan(models)
    results = run_jobs(ctx, group_jobs(checks), options, cache, on_job, times, recipes, progress)
    observations = CompileObservations(root)
    results = reality_first(models, results, observations)
    observations.save()
    recipes.save()
    if not only:  # a run of a few models keeps the batch of the whole lock as it is
        cache.save_batch(batch, list(cache.keys_used))
    ctx.hashes.save()
    warnings = [
        *([distrust] if distrust and options.use_cache else []),  # --no-cache reads no result anyway
        *(line for model in models for line in model_warnings(model)),
    ]
    return Report(lock=str(project.lock_path), results=_in_plan_order(checks, results), warnings=warnings)


def run_jobs(
    ctx: VerifyContext,
    jobs: list[VerifyJob],
    options: ExecutorOptions,
    cache: ResultCache | None,
    on_job: JobProgress | None = None,
    times: JobTimes | None = None,
    recipes: KeyRecipes | None = None,
    progress: Progress | None = None,
) -> list[GateResult]:
    """Answer cached jobs here, run the others on the executor (in `_run_order`), store what
    they return. `recipes` remembers the lock's part of each key between runs. A toolkit is
    installed only for jobs the cache did not answer: a fully cached verify needs none."""
    tracker = _Tracker(on_job, sum(len(job.checks) for job in jobs))
    if options.executor == "local" and jobs and (cache is None or not cache.may_answer()):
        _hint_first_session(ctx, jobs[_run_order(list(range(len(jobs))), jobs, options, times)[0]])
        _warm_up_gates()
    keys = _job_keys(ctx, jobs, recipes) if cache is not None else [""] * len(jobs)
    answered: dict[int, list[GateResult]] = {}
    for position, job in enumerate(jobs):
        cached = cache.get(keys[position]) if cache is not None else None
        if cached is not None:
            answered[position] = cached
            tracker.advance(len(job.checks), job.label + CACHED_SUFFIX)
    # ordered after the cache answered: a cached run orders none of its (thousands of) jobs
    todo = _run_order([p for p in range(len(jobs)) if p not in answered], jobs, options, times)
    ensure_toolchains({v for p in todo if (v := jobs[p].toolkit) is not None}, progress)
    if todo and options.executor == "local":
        _prestart(ctx, [jobs[position] for position in todo], options.jobs)
    # decided just before the fork: whether this thread is the process's only one
    forked = _in_processes(ctx, [jobs[position] for position in todo], options)

    def finished(index: int, results: list[GateResult], seconds: float, written: bool = False) -> None:
        position = todo[index]
        answered[position] = results
        if cache is not None and not written:
            cache.put(keys[position], results)
        if times is not None:
            times.record(jobs[position].label, seconds)
        tracker.advance(len(jobs[position].checks), jobs[position].label)

    def stored(index: int, value: tuple[list[GateResult], str | None], seconds: float) -> None:
        results, document = value
        if cache is not None and document is not None:
            cache.adopt(keys[todo[index]], document)
        finished(index, results, seconds, written=True)

    try:
        if forked:
            stores = [(cache, keys[position]) for position in todo]
            tasks = job_tasks(ctx, [jobs[position] for position in todo], stores)
            run_in_processes(tasks, _by_model([jobs[p] for p in todo]), options.jobs, stored)
        else:
            run_tasks(job_tasks(ctx, [jobs[position] for position in todo]), options, finished)
    finally:
        if times is not None and todo:
            times.save()
    tracker.finish()
    return [result for position in range(len(jobs)) for result in answered[position]]


def _in_processes(ctx: VerifyContext, jobs: list[VerifyJob], options: ExecutorOptions) -> bool:
    """Whether `jobs` run on forked worker processes (`baseline.executors.processes`): local,
    several at once, more than one model, and none borrowing a toolkit worker or a board (those
    jobs spend their time in other processes already; threads share them)."""
    return (
        options.executor == "local"
        and len({job.model for job in jobs}) > 1
        and can_use_processes(options.jobs)
        and all(job.toolkit is None and not board_resources(ctx.lock, job) for job in jobs)
    )


def _by_model(jobs: list[VerifyJob]) -> list[list[int]]:
    """Indices of `jobs` by model, in the order each model first appears: a worker runs one
    model's jobs together, and its ONNX helper builds that model's session once."""
    groups: dict[str, list[int]] = {}
    for index, job in enumerate(jobs):
        groups.setdefault(job.model, []).append(index)
    return list(groups.values())


def _job_keys(ctx: VerifyContext, jobs: list[VerifyJob], recipes: KeyRecipes | None) -> list[str]:
    shared = lock_wide_dependencies(ctx)
    live = LiveInputs(ctx)
    if recipes is None:
        return [live.key(key_recipe(ctx, job, shared)) for job in jobs]
    return [live.key(recipes.recipe(ctx, job, shared)) for job in jobs]


def _prestart(ctx: VerifyContext, todo: list[VerifyJob], parallel: int) -> None:
    """The ONNX helper and the toolkit workers the jobs will borrow start now: their imports
    (onnxruntime ~1 s, the toolkit ~1.5-2 s) run while the first jobs start. A job whose run
    is kept (`runcache`: after a tolerance edit, every one) borrows no worker: none is started
    for it (measured on a 83 MB CNN re-judged after a tolerance edit: a toolkit import of
    ~1.5 s CPU, 3-15 s of wall time on a loaded 2-core machine, for nothing)."""
    from baseline.runtime.isolated import HELPERS

    HELPERS.prestart(fork=True)  # a copy shares numpy and the models, where `safe_to_fork`
    versions: dict[str, int] = {}
    for job in todo:
        if _will_convert(ctx, job) and job.toolkit is not None:
            versions[job.toolkit] = min(versions.get(job.toolkit, 0) + 1, parallel)
    if versions:
        from baseline.backends.rknn_sim import prestart_workers

        prestart_workers(versions)


def _will_convert(ctx: VerifyContext, job: VerifyJob) -> bool:
    """Whether `job` needs a toolkit worker: a toolkit backend whose run is not kept."""
    if job.backend is None or job.toolkit is None or not capabilities(job.backend).uses_toolkit:
        return False
    model = ctx.lock.model(job.model)
    return model is None or not ctx.has_kept_run(model, job.backend, job.target)


def _hint_first_session(ctx: VerifyContext, first: VerifyJob) -> None:
    """In a run the cache cannot answer, the first job builds its model's onnxruntime session
    in the ONNX helper (for the static check's probe and the golden run). An ONNX helper that
    `baseline.launch` started begins building it now, while this process computes keys and
    reads fixtures and the helper itself still imports (measured: ~0.1 s off a cold verify of
    a 54 MB CNN). Without a running helper nothing happens."""
    from baseline.runtime.isolated import BUILD_SESSION, HELPERS

    model = ctx.lock.model(first.model)
    if model is not None:
        path = ctx.project.pinned(model.onnx, f"models.{model.name}.onnx").absolute()
        HELPERS.hint(BUILD_SESSION, (path,))


def _warm_up_gates() -> None:
    """The gates judge outputs and compare versions in this process once the helper has run the
    model; what numpy and packaging load on first use, the gates' late imports and their
    metrics records are made while this process first waits for the helper (~0.04 s)."""
    from baseline import compare, compat
    from baseline.models.results import build_gate_records
    from baseline.runtime.isolated import while_waiting

    while_waiting(compare.warm_up)
    while_waiting(compat.warm_up)
    while_waiting(functools.partial(importlib.import_module, "baseline.tasks.parts"))
    while_waiting(build_gate_records)


def _run_order(
    positions: list[int], jobs: list[VerifyJob], options: ExecutorOptions, times: JobTimes | None
) -> list[int]:
    """`positions` of `jobs` in the order they start. Several at once: longest first, so that a
    long job does not start last and leave a core idle. One at a time (local, `--jobs 1`), the
    order changes no total and the plan's is kept: a model's jobs run together (the ONNX helper
    keeps one model's session and analysis), as the report lists them, and the static check,
    planned before the golden run, does its parsing while the helper still builds the session
    (measured: ~0.03 s of a 54 MB CNN's cold verify)."""
    if options.executor == "local" and options.jobs == 1:
        return positions
    return _longest_first(positions, jobs, times)


def _longest_first(todo: list[int], jobs: list[VerifyJob], times: JobTimes | None) -> list[int]:
    """Jobs never timed first (they may be long), then by their last duration, longest first."""
    if times is None:
        return todo

    def last(position: int) -> float:
        seconds = times.estimate(jobs[position].label)
        return float("inf") if seconds is None else seconds

    return sorted(todo, key=last, reverse=True)


def job_tasks(
    ctx: VerifyContext, jobs: list[VerifyJob], stores: list[tuple[ResultCache | None, str]] | None = None
) -> list[Task]:
    """The executor's view of the jobs: each carries a context narrowed to its own model (what
    a thread or a Ray task gets). With `stores` (a cache and a key per job), each job stores its
    own results (`run_and_store`), as a forked worker does; a fork ships nothing (the tasks are a
    copy of memory), so those jobs share the whole context (narrowing a 1,000-model zoo's 3,000
    jobs took ~0.1 s, serial before the first job)."""
    tasks = []
    for index, job in enumerate(jobs):
        resources = board_resources(ctx.lock, job)
        tasks.append(
            Task(
                name=f"verify {job.label}",
                call=run_job if stores is None else run_and_store,
                args=(ctx.for_model(job.model), job) if stores is None else (ctx, job, *stores[index]),
                resources=resources,
                owner=f"model {job.model!r} ({job.backend} on {job.target})",
                small=job.toolkit is None and not resources,
            )
        )
    return tasks


def run_and_store(
    ctx: VerifyContext, job: VerifyJob, cache: ResultCache | None, key: str
) -> tuple[list[GateResult], str | None]:
    """`run_job`, and its results stored under `key` here: a forked worker writes its own cache
    entries (on a busy disk a write took 4-6 ms, most of the caller's time) and returns the text."""
    results = run_job(ctx, job)
    return results, cache.write(key, results) if cache is not None else None


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
    return group_jobs(plan(models))


def group_jobs(checks: list[tuple[ModelLock, GateJob]]) -> list[VerifyJob]:
    groups: dict[tuple[str, str | None, str | None], tuple[ModelLock, list[GateJob]]] = {}
    for model, check in checks:
        groups.setdefault((model.name, check.backend, check.target), (model, []))[1].append(check)
    return [
        VerifyJob(name, backend, target, _toolkit_of(model, backend), tuple(grouped))
        for (name, backend, target), (model, grouped) in groups.items()
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


def _in_plan_order(checks: list[tuple[ModelLock, GateJob]], results: list[GateResult]) -> list[GateResult]:
    """Results as a model-by-model run would list them, however the jobs were grouped."""
    order = {(model.name, c.gate, c.backend, c.target): i for i, (model, c) in enumerate(checks)}
    return sorted(results, key=lambda r: order[(r.model, r.gate, r.backend, r.target)])


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
