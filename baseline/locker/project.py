"""The whole lock: one job per model on an executor, then the new baseline judged by its own gates
and written tensors first, lock last (only if it changed)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from baseline.backends import needs_board, uses_toolkit
from baseline.errors import BaselineError, InputError
from baseline.executors import ExecutorOptions, Task, run_tasks
from baseline.files.hashing import sha256_file
from baseline.files.textsafe import name_list
from baseline.locker.files import PendingFiles, Workspace
from baseline.locker.memo import LockMemo, RememberedJob
from baseline.locker.remeasure import pin_what_varies
from baseline.locker.selfcheck import SelfCheck, self_check
from baseline.models.intent import Intent
from baseline.models.lock import (
    Lock,
    ModelLock,
)
from baseline.project.intent import (
    ResolvedModel,
    intent_hash,
    load_intent,
    resolve_models,
)
from baseline.project.layout import Project
from baseline.project.lockfile import load_lock, write_lock
from baseline.toolchain.provision import Progress, ensure_toolchains, find_toolchain
from baseline.toolchain.signatures import check_dtype, check_platform, check_settings
from baseline.verification.cache import FileHashes
from baseline.versions import host_toolchain

if TYPE_CHECKING:
    from baseline.locker.model import ModelOutcome
    from baseline.verification.runcache import RunCache


@dataclass
class LockOutcome:
    lock: Lock
    changed: bool
    self_check: SelfCheck | None = None
    """The new baseline judged by its own gates (see `baseline.locker.selfcheck`)."""


def lock_project(
    project: Project,
    progress: Progress | None = None,
    options: ExecutorOptions | None = None,
    strict: bool = False,
    memo: LockMemo | None = None,
) -> LockOutcome:
    """Build the lock for every model in the intent and write it (only if it changed).

    The new baseline is judged by its own consistency and task gates first; with `strict`, a
    baseline that fails them is refused (nothing is written) with the values that would pass.
    With a `memo` (`locker.memo`), a model whose lock job is remembered, and whose pinned files
    are on disk as it remembers them, is not measured again (a relock of a zoo measures only
    what changed), and each model's job is remembered for the next `lock` and `lock --check`.
    """
    with project.exclusive():  # a second `baseline lock` waits instead of interleaving writes
        return write_new_lock(project, progress, options, strict, memo)


def write_new_lock(
    project: Project,
    progress: Progress | None = None,
    options: ExecutorOptions | None = None,
    strict: bool = False,
    memo: LockMemo | None = None,
) -> LockOutcome:
    """Build, self-check and write the lock; the caller holds `project.exclusive()`."""
    outcome, pending = _write_new_lock(project, progress, options, strict, memo)
    if memo is not None:
        remember_written(project, memo, outcome.lock, pending)
        # the file now holds `render_lock(outcome.lock)`, written or found so (rendering
        # 1,000 models again took ~1 s)
        memo.parsed_lock(project).mark_canonical(sha256_file(project.lock_path))
        memo.save()
    return outcome


def _write_new_lock(
    project: Project,
    progress: Progress | None,
    options: ExecutorOptions | None,
    strict: bool,
    memo: LockMemo | None = None,
) -> tuple[LockOutcome, PendingFiles]:
    lock, pending = build_lock(project, progress, options, memo, files_on_disk=True, repeat=not strict)
    runs = memo.runs if memo is not None else None
    return write_checked(project, lock, pending, strict, runs), pending


def write_checked(
    project: Project, lock: Lock, pending: PendingFiles, strict: bool = False, runs: RunCache | None = None
) -> LockOutcome:
    checked = self_check(project, lock, pending.tensors(), runs=runs)
    if strict and checked.failed:
        raise InputError(
            f"{project.lock_path}: not written, the new baseline fails its own gates; "
            + "; ".join(checked.lines())
        )
    pending.write()
    changed = write_lock(project.lock_path, lock)
    pending.collect_garbage()  # only once the new lock is in place
    return LockOutcome(lock=lock, changed=changed, self_check=checked)


def stale_files(project: Project, pending: PendingFiles, hashes: FileHashes | None = None) -> list[str]:
    """Tensor and artifact files whose bytes would change (for `baseline lock --check`); files
    known only by hash are compared by hash (`hashes` remembers unchanged files' hashes)."""
    hashes = hashes or FileHashes()
    changed = [
        path for path, data in pending.files.items() if not path.is_file() or path.read_bytes() != data
    ]
    changed += [
        path
        for path, digest in pending.digests.items()
        if not path.is_file() or hashes.sha256(path) != digest
    ]
    return [project.relative(path) for path in sorted(changed)]


def build_lock(
    project: Project,
    progress: Progress | None = None,
    options: ExecutorOptions | None = None,
    memo: LockMemo | None = None,
    files_on_disk: bool = False,
    repeat: bool = False,
) -> tuple[Lock, PendingFiles]:
    """Measure everything the intent names, one job per model; nothing is written.

    With `repeat`, every model measured now is measured a second time and what varies between
    the two is pinned in its entry (`baseline.locker.remeasure`): a lock that passes its own verify.

    With a `memo`, a model whose lock job is remembered (`locker.memo`) is not measured again,
    and the files it pins are known by hash only; every job that runs is remembered. With
    `files_on_disk` (a lock about to be written, which cannot write bytes it does not have), a
    remembered job counts only when its files are on disk with the hashes it remembers."""
    project.forget_paths()
    intent = load_intent(project.intent_path)
    resolved = resolve_models(intent)
    ensure_toolchains(_toolkit_versions(resolved), progress)
    _check_conversion_settings(project, resolved)
    previous = _previous_lock(project, memo)
    tensor_dir = _tensor_dir(project, intent)
    captures = project.resolve(intent.project.captures, f"{project.intent_path}: project.captures")
    places = {"tensors": project.relative(tensor_dir), "captures": intent.project.captures}
    keys = (
        {m.name: memo.job_key(project, m, _previous(previous, m), places) for m in resolved} if memo else {}
    )
    remembered = _remembered(project, memo, keys, files_on_disk)
    todo = [model for model in resolved if model.name not in remembered]
    _check_normalisation(project, todo)
    runs = memo.runs if memo is not None else None
    tasks = _lock_tasks(project, todo, tensor_dir, captures, previous, runs)
    if progress is not None:
        unchanged = f" ({len(remembered)} unchanged, answered from the cache)" if remembered else ""
        names = f": {name_list([model.name for model in todo])}" if todo else ""
        progress(f"locking {len(tasks)} models{unchanged}{names}")
    done = _report_done(tasks, progress) if progress is not None else None
    outcomes: list[ModelOutcome] = run_tasks(tasks, options or ExecutorOptions(), done)
    if repeat and todo:
        outcomes = _measured_again(
            project, intent, todo, outcomes, (tensor_dir, captures, previous, runs), progress, options
        )
    pending = _pending(
        project, memo, keys, dict(zip([m.name for m in todo], outcomes, strict=True)), remembered
    )
    jobs = [pending.jobs[model.name] for model in resolved]
    toolkits = {version: pin for job in jobs for version, pin in job.toolkits.items()}
    lock = Lock(
        inputs_hash=intent_hash(intent),
        toolchain=host_toolchain(),
        captures=intent.project.captures,
        toolkits=[toolkits[version] for version in sorted(toolkits)],
        models=[job.model for job in jobs],
        **_carried_over(previous),
    )
    return _keep_information(lock, previous), pending


def _measured_again(
    project: Project,
    intent: Intent,
    models: list[ResolvedModel],
    outcomes: list[ModelOutcome],
    places: tuple[Path, Path, Lock | None, RunCache | None],
    progress: Progress | None,
    options: ExecutorOptions | None,
) -> list[ModelOutcome]:
    """`outcomes` with each model's entry carrying what a second measurement showed to vary. The
    second runs in new toolkit processes: some builds differ only between processes."""
    from baseline.backends.rknn_sim import fresh_workers

    if progress is not None:
        progress(
            f"measuring {len(models)} models again: what varies with nothing changed is pinned, not guessed"
        )
    fresh_workers()
    again: list[ModelOutcome] = run_tasks(
        _lock_tasks(project, models, *places, measurement=2), options or ExecutorOptions()
    )
    first, second = _measurement(intent, outcomes), _measurement(intent, again)
    measured = {model.name: model for model in pin_what_varies(project, first, second, progress)}
    return [dataclasses.replace(o, model=measured.get(o.model.name, o.model)) for o in outcomes]


def _measurement(intent: Intent, outcomes: list[ModelOutcome]) -> tuple[Lock, dict[Path, bytes]]:
    """One measurement of some models, as the self-check reads a lock about to be written."""
    files: dict[Path, bytes] = {}
    for outcome in outcomes:
        files.update(outcome.files.files)
    lock = Lock(
        inputs_hash=intent_hash(intent), toolchain=host_toolchain(), models=[o.model for o in outcomes]
    )
    return lock, files


def _lock_tasks(
    project: Project,
    models: list[ResolvedModel],
    tensor_dir: Path,
    captures: Path,
    previous: Lock | None,
    runs: RunCache | None = None,
    measurement: int = 1,
) -> list[Task]:
    if not models:
        return []
    from baseline.locker.model import lock_model  # numpy and onnx: only needed to measure

    return [
        Task(
            name=f"lock {model.name}",
            call=lock_model,
            args=(
                project,
                model,
                Workspace(
                    tensor_dir / model.name,
                    captures,
                    _previous(previous, model),
                    runs=runs,
                    measurement=measurement,
                ),
            ),
            resources=_board_resources(model),
            owner=f"model {model.name!r}",
            small=not uses_toolkit(model.backends),  # onnxruntime's references only
        )
        for model in models
    ]


def _remembered(
    project: Project, memo: LockMemo | None, keys: dict[str, str | None], files_on_disk: bool
) -> dict[str, RememberedJob]:
    if memo is None:
        return {}
    found = {name: memo.get(project, key) for name, key in keys.items()}
    return {
        name: job
        for name, job in found.items()
        if job is not None and (not files_on_disk or _files_as_remembered(job, memo.hashes))
    }


def _files_as_remembered(job: RememberedJob, hashes: FileHashes) -> bool:
    """Whether every file the job pins is on disk with the sha256 it remembers (through the
    stat cache: an unchanged file is not read again)."""
    return all(path.is_file() and hashes.sha256(path) == digest for path, digest in job.digests.items())


def _pending(
    project: Project,
    memo: LockMemo | None,
    keys: dict[str, str | None],
    ran: dict[str, ModelOutcome],
    remembered: dict[str, RememberedJob],
) -> PendingFiles:
    """Every model's files and job: the bytes of those measured now (each remembered for the
    next check), the hashes of those remembered."""
    pending = PendingFiles(jobs=dict(remembered))
    for job in remembered.values():
        pending.digests.update(job.digests)
    for name, outcome in ran.items():
        pending.add(outcome.files)
        pending.jobs[name] = RememberedJob(outcome.model, outcome.toolkits, outcome.files.sha256())
        if memo is not None:
            memo.put(project, keys[name], pending.jobs[name])
    return pending


def remember_written(project: Project, memo: LockMemo, lock: Lock, pending: PendingFiles) -> None:
    """After `baseline lock` wrote `lock`: remember each model under the key its next check
    computes, whose replaced entry is the one just written (a relock gives it back unchanged)."""
    intent = load_intent(project.intent_path)
    places = {"tensors": project.relative(_tensor_dir(project, intent)), "captures": intent.project.captures}
    for model in resolve_models(intent):
        entry, job = lock.model(model.name), pending.jobs.get(model.name)
        if entry is not None and job is not None:
            written = RememberedJob(entry, job.toolkits, job.digests)
            memo.put(project, memo.job_key(project, model, entry, places), written)


def _report_done(tasks: list[Task], progress: Progress) -> Callable[[int, Any, float], None]:
    """One line per finished model: `lock` and `accept` convert every target, which takes minutes."""
    finished = 0

    def done(index: int, _value: Any, seconds: float) -> None:
        nonlocal finished
        finished += 1
        progress(f"[{finished}/{len(tasks)}] {tasks[index].name} done in {seconds:.1f} s")

    return done


def _keep_information(lock: Lock, previous: Lock | None) -> Lock:
    """The previous lock, as it is, when nothing decisive changed.

    What differs then is information: the library versions that produced the results, and
    statistics another numpy rounds differently from the same tensors. Another machine with
    newer patch releases that reproduces the results must not rewrite the lock (nor fail
    `lock --check`), or the lock would flap between machines.
    """
    if previous is None or lock.decisive() != previous.decisive():
        return lock
    return previous


def _toolkit_versions(models: list[ResolvedModel]) -> set[str]:
    return {model.toolkit.version for model in models if uses_toolkit(model.backends)}


def _check_conversion_settings(project: Project, models: list[ResolvedModel]) -> None:
    """Every toolkit argument the intent sets must exist in its pinned version, before any work."""
    for model in models:
        toolchain = find_toolchain(model.toolkit.version) if uses_toolkit(model.backends) else None
        if toolchain is None:
            continue
        for target in model.targets:
            where = f"{project.intent_path}: models.{model.name}, target {target.name!r}"
            check_platform(target.platform, toolchain, where)
            if target.quantization is not None:
                check_dtype(target.platform, target.quantization.dtype, toolchain, where)
            check_settings(target.conversion, toolchain, where)


def _check_normalisation(project: Project, models: list[ResolvedModel]) -> None:
    """`mean_values` / `std_values` must fit the model's inputs (one number per channel), refused
    before any model is measured: in its own job the refusal came after other models converted.
    Only models that set them have their graph's inputs read here."""
    from baseline.files.images import fixture_feeds
    from baseline.files.onnx_facts import graph_inputs, load_onnx_structure, tensor_specs

    for model in models:
        config = model.conversion.config if model.conversion is not None else {}
        if "mean_values" not in config and "std_values" not in config:
            continue
        where = f"{project.intent_path}: models.{model.name}.onnx"
        path = project.resolve(model.onnx, where, file=True)
        inputs = tensor_specs(graph_inputs(load_onnx_structure(path)), path)
        fixture_feeds(model.fixtures, model.conversion, inputs, model.name)


def _board_resources(model: ResolvedModel) -> dict[str, float]:
    """A model measured on a board backend locks on the host that has the board (see verify)."""
    if not needs_board(model.backends):
        return {}
    return {target.platform: 1.0 for target in model.targets}


def _previous(previous: Lock | None, model: ResolvedModel) -> ModelLock | None:
    return previous.model(model.name) if previous is not None else None


def _tensor_dir(project: Project, intent: Intent) -> Path:
    if intent.project.tensors is None:
        return project.default_tensor_dir()
    return project.resolve(intent.project.tensors, f"{project.intent_path}: project.tensors")


def _previous_lock(project: Project, memo: LockMemo | None) -> Lock | None:
    """The lock being replaced; an unreadable one is simply replaced."""
    if not project.lock_path.is_file():
        return None
    try:
        replaced = load_lock(project.lock_path, memo.parsed_lock(project) if memo is not None else None)
    except BaselineError:
        return None
    if memo is not None:
        memo.replaced = replaced
    return replaced


def _carried_over(previous: Lock | None) -> dict[str, Any]:
    """What a relock keeps from the old lock: the audit trail, the boards observed on hardware and
    the last calibration (provenance of the intent's tolerances; its entries name the ONNX hash)."""
    if previous is None:
        return {}
    return {"audit": previous.audit, "boards": previous.boards, "calibration": previous.calibration}
