"""The whole lock: one job per model on an executor, then the new baseline judged by its own gates
and written tensors first, lock last (only if it changed)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from baseline.backends import needs_board, uses_toolkit
from baseline.errors import BaselineError, InputError
from baseline.executors import ExecutorOptions, Task, run_tasks
from baseline.intent import (
    ResolvedModel,
    intent_hash,
    load_intent,
    resolve_models,
)
from baseline.locker.files import PendingFiles, Workspace
from baseline.locker.model import ModelOutcome, lock_model
from baseline.lockfile import load_lock, write_lock
from baseline.models.intent import Intent
from baseline.models.lock import (
    Lock,
    ModelLock,
)
from baseline.project import Project
from baseline.toolchain.provision import Progress, ensure_toolchains, find_toolchain
from baseline.toolchain.signatures import check_settings
from baseline.versions import host_toolchain

if TYPE_CHECKING:
    from baseline.selfcheck import SelfCheck


@dataclass
class LockOutcome:
    lock: Lock
    changed: bool
    self_check: SelfCheck | None = None
    """The new baseline judged by its own gates (see `baseline.selfcheck`)."""


def lock_project(
    project: Project,
    progress: Progress | None = None,
    options: ExecutorOptions | None = None,
    strict: bool = False,
) -> LockOutcome:
    """Build the lock for every model in the intent and write it (only if it changed).

    The new baseline is judged by its own consistency and task gates first; with `strict`, a
    baseline that fails them is refused (nothing is written) with the values that would pass.
    """
    with project.exclusive():  # a second `baseline lock` waits instead of interleaving writes
        return write_new_lock(project, progress, options, strict)


def write_new_lock(
    project: Project,
    progress: Progress | None = None,
    options: ExecutorOptions | None = None,
    strict: bool = False,
) -> LockOutcome:
    """Build, self-check and write the lock; the caller holds `project.exclusive()`."""
    lock, pending = build_lock(project, progress, options)
    return write_checked(project, lock, pending, strict)


def write_checked(project: Project, lock: Lock, pending: PendingFiles, strict: bool = False) -> LockOutcome:
    from baseline.selfcheck import self_check  # runs the gates, which import this module's neighbours

    checked = self_check(project, lock, pending.files)
    if strict and checked.failed:
        raise InputError(
            f"{project.lock_path}: not written, the new baseline fails its own gates; "
            + "; ".join(checked.lines())
        )
    pending.write()
    changed = write_lock(project.lock_path, lock)
    pending.collect_garbage()  # only once the new lock is in place
    return LockOutcome(lock=lock, changed=changed, self_check=checked)


def stale_files(project: Project, pending: PendingFiles) -> list[str]:
    """Tensor and artifact files whose bytes would change (for `baseline lock --check`)."""
    return [
        project.relative(path)
        for path, data in pending.files.items()
        if not path.is_file() or path.read_bytes() != data
    ]


def build_lock(
    project: Project, progress: Progress | None = None, options: ExecutorOptions | None = None
) -> tuple[Lock, PendingFiles]:
    """Measure everything the intent names, one job per model; nothing is written."""
    project.forget_paths()
    intent = load_intent(project.intent_path)
    resolved = resolve_models(intent)
    ensure_toolchains(_toolkit_versions(resolved), progress)
    _check_conversion_settings(project, resolved)
    previous = _previous_lock(project.lock_path)
    tensor_dir = _tensor_dir(project, intent)
    captures = project.resolve(intent.project.captures, f"{project.intent_path}: project.captures")
    tasks = [
        Task(
            name=f"lock {model.name}",
            call=lock_model,
            args=(project, model, Workspace(tensor_dir / model.name, captures, _previous(previous, model))),
            resources=_board_resources(model),
            owner=f"model {model.name!r}",
        )
        for model in resolved
    ]

    if progress is not None:
        progress(f"locking {len(tasks)} models: {', '.join(model.name for model in resolved)}")
    done = _report_done(tasks, progress) if progress is not None else None
    outcomes: list[ModelOutcome] = run_tasks(tasks, options or ExecutorOptions(), done)
    pending, toolkits = PendingFiles(), {}
    for outcome in outcomes:
        pending.add(outcome.files)
        toolkits.update(outcome.toolkits)
    lock = Lock(
        inputs_hash=intent_hash(intent),
        toolchain=host_toolchain(),
        captures=intent.project.captures,
        toolkits=[toolkits[version] for version in sorted(toolkits)],
        models=[outcome.model for outcome in outcomes],
        **_carried_over(previous),
    )
    return _keep_information(lock, previous), pending


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
            check_settings(target.conversion, toolchain, where)


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


def _previous_lock(lock_path: Path) -> Lock | None:
    """The lock being replaced; an unreadable one is simply replaced."""
    if not lock_path.is_file():
        return None
    try:
        return load_lock(lock_path)
    except BaselineError:
        return None


def _carried_over(previous: Lock | None) -> dict[str, Any]:
    """What a relock keeps from the old lock: the audit trail, the boards observed on hardware and
    the last calibration (provenance of the intent's tolerances; its entries name the ONNX hash)."""
    if previous is None:
        return {}
    return {"audit": previous.audit, "boards": previous.boards, "calibration": previous.calibration}
