"""Commands that write or compare locks: `lock`, `diff`, `accept`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from baseline.cli.boundary import EXIT_GATE_FAILED
from baseline.cli.options import (
    AddressOption,
    ConfigOption,
    Executor,
    ExecutorOption,
    FormatOption,
    JobsOption,
    LockOption,
    OutputFormat,
    RootOption,
)
from baseline.cli.output import output
from baseline.files.textsafe import markup_safe as escape
from baseline.files.textsafe import name_list

if TYPE_CHECKING:
    from baseline.executors import ExecutorOptions
    from baseline.locker import LockOutcome
    from baseline.models.lock import Lock
    from baseline.project.diff import LockDifference
    from baseline.project.layout import Project


def lock(
    lock: LockOption = Path("baseline.lock"),
    config: ConfigOption = None,
    root: RootOption = None,
    check_only: Annotated[
        bool, typer.Option("--check", help="Write nothing; exit 1 if the lock would change (for CI).")
    ] = False,
    jobs: JobsOption = 1,
    executor: ExecutorOption = Executor.local,
    address: AddressOption = None,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict", help="Refuse (exit 2) a baseline that fails its own consistency or task gate."
        ),
    ] = False,
    calibrate: Annotated[
        bool,
        typer.Option(
            "--calibrate",
            help="Measure --runs times (reconverting each time) and print tolerances for the intent, "
            "with their provenance recorded in the lock.",
        ),
    ] = False,
    runs: Annotated[int, typer.Option(min=1, max=20, help="Measurements for --calibrate.")] = 3,
    margin: Annotated[
        float, typer.Option(min=1.0, max=4.0, help="Headroom --calibrate puts on the worst measured spread.")
    ] = 1.5,
    no_cache: Annotated[
        bool,
        typer.Option(
            "--no-cache",
            help="Measure every model again instead of answering unchanged ones from the cache "
            "(fresh answers are still stored).",
        ),
    ] = False,
) -> None:
    """Measure every model in the intent file and write the lock (only if it changed)."""
    from baseline.executors import ExecutorOptions
    from baseline.locker import lock_project
    from baseline.locker.memo import LockMemo
    from baseline.project.layout import Project

    options = ExecutorOptions(executor=executor.value, jobs=jobs, address=address)
    project = Project.locate(lock, config, root)
    if check_only:
        _check_lock(project, options, use_cache=not no_cache)
        return
    if calibrate:
        _calibrate(project, options, runs, margin)
        return
    memo = LockMemo.open(project, read=not no_cache)
    if memo.distrust:
        output.warning(memo.distrust)
    outcome = lock_project(project, progress=output.progress, options=options, strict=strict, memo=memo)
    _report_lock(lock, outcome)


def _report_lock(lock: Path, outcome: LockOutcome) -> None:
    models = name_list([model.name for model in outcome.lock.models])
    state = "written" if outcome.changed else "unchanged"
    output.line(f"{lock}: {state} ({len(outcome.lock.models)} models: {models})")
    from baseline.verification.excuses import model_warnings

    _report_measured(outcome.lock)
    for model in outcome.lock.models:
        for warning in model_warnings(model):
            output.warning(warning)
        if model.exporter.git_gap is not None:
            output.warning(f"model {model.name!r}: {model.exporter.git_gap}")
    checked = outcome.self_check
    if checked is not None and checked.failed:
        output.warning(
            f"the new baseline fails {len(checked.failed)} of its own gate checks; `verify` will fail "
            "until the intent changes (or use `baseline lock --strict` to refuse such a baseline):"
        )
        for line in checked.lines():
            output.warning(f"  {line}")


def _report_measured(lock: Lock) -> None:
    """One review table of what the lock measured beyond the intent (shown again by `diff`)."""
    measured = [model for model in lock.models if model.measured is not None]
    if not measured:
        return
    output.line(
        f"measured beyond the intent ({len(measured)} of {len(lock.models)} models; each was converted "
        "and run twice with nothing changed, and a limit has ×1.5 headroom over the worst spread):"
    )
    for model in measured:
        assert model.measured is not None
        for line in model.measured.lines():
            output.line(f"  {escape(model.name)}: {escape(line)}")


def _calibrate(project: Project, options: ExecutorOptions, runs: int, margin: float) -> None:
    from baseline.locker import calibrate_project
    from baseline.locker.selfcheck import proposed_intent

    outcome, calibration = calibrate_project(project, runs, margin, output.progress, options)
    _report_lock(project.lock_path, outcome)
    output.note(
        f"calibrated over {runs} measurement(s); paste into the intent file "
        f"{project.intent_path} under each model to use these tolerances:"
    )
    output.document(proposed_intent(calibration))


def _check_lock(project: Project, options: ExecutorOptions, use_cache: bool) -> None:
    from baseline.locker import build_lock, stale_files
    from baseline.locker.memo import LockMemo
    from baseline.project.diff import decisive, diff_locks
    from baseline.project.lockfile import load_lock

    memo = LockMemo.open(project, read=use_cache)
    if memo.distrust:
        output.warning(memo.distrust)
    fresh, pending = build_lock(project, progress=output.progress, options=options, memo=memo, repeat=True)
    current_text = project.lock_path.read_text() if project.lock_path.is_file() else ""
    files = stale_files(project, pending, memo.hashes)
    memo.save()
    if memo.renders_as(project, fresh, current_text) and not files:
        output.line(f"{project.lock_path}: up to date")
        return
    # the lock `build_lock` read and replaced is this file's: not parsed a second time (the
    # TOML reader takes ~0.9 s for 1,000 models); read again only if `build_lock` could not
    current = memo.replaced
    if current is None and current_text:
        current = load_lock(project.lock_path)
    changes = diff_locks(current, fresh) if current is not None and current_text else []
    counted = len(decisive(changes))
    rebuilt = _rebuilt_artifacts(fresh, changes)
    files = [path for path in files if path not in rebuilt]
    if current_text and changes and not files and all(_rebuilt(change) for change in changes):
        output.line(
            f"{project.lock_path}: up to date (the .rknn of {len(rebuilt)} build(s) whose bytes differ "
            "on every conversion were rebuilt; they are judged by I/O contract and outputs)"
        )
        return
    if not current_text:
        summary = "does not exist"
    elif counted or files:
        summary = f"would change ({counted} values, {len(files)} files)"
    else:  # same values: only the text differs, e.g. written by another version of baseline
        summary = "would be rewritten (same values, different text)"
    output.line(f"{project.lock_path}: {summary}; run `baseline lock`")
    for change in changes[:40]:
        output.line(f"  {escape(change.line())}")
    if len(changes) > 40:
        output.line(f"  … and {len(changes) - 40} more (`baseline lock` then `baseline diff` lists them all)")
    for path in files:
        output.line(f"  file {path} would be rewritten")
    raise typer.Exit(EXIT_GATE_FAILED)


def _rebuilt_artifacts(fresh: Lock, changes: list[LockDifference]) -> set[str]:
    """The fresh lock's `.rknn` files of builds whose bytes vary by conversion, where only their
    hash changed (`diff` reports that as information)."""
    from baseline.project.diff import varying_builds

    rebuilt = {(c.scope, c.path[1]) for c in changes if _rebuilt(c)}
    return {
        pin.artifact.path
        for model in fresh.models
        for pin in model.conversions
        if (model.name, pin.target) in rebuilt and pin.target in varying_builds(model)
    }


def _rebuilt(change: LockDifference) -> bool:
    """A conversion value `diff` reports as information: the new bytes of a varying build."""
    return change.information and change.path[:1] == ("conversions",)


def diff(
    old: Annotated[Path | None, typer.Argument(help="The older lock (default: --lock at --rev).")] = None,
    new: Annotated[Path | None, typer.Argument(help="The newer lock (default: --lock).")] = None,
    lock: LockOption = Path("baseline.lock"),
    rev: Annotated[
        str | None,
        typer.Option(help="Compare --lock with its version at this git revision (tag, branch, commit)."),
    ] = None,
    output_format: FormatOption = OutputFormat.text,
    exit_code: Annotated[
        bool,
        typer.Option(
            "--exit-code",
            help="Exit 1 if the locks differ in more than information-only versions (as git diff).",
        ),
    ] = False,
) -> None:
    """What changed between two locks: versions, hashes, opsets, artifacts, output statistics."""
    from baseline.project.diff import decisive, diff_locks
    from baseline.project.lockfile import lock_at_revision

    older = _load_remembered(old) if old is not None else lock_at_revision(lock, rev or "HEAD")
    newer = _load_remembered(new if new is not None else lock)
    changes = diff_locks(older, newer)
    if output_format is OutputFormat.json:
        document = {"changes": [dataclasses.asdict(change) for change in changes]}
        output.document(json.dumps(document, indent=2, default=str) + "\n")
    else:
        for change in changes:
            output.line(escape(change.line()))
        output.line(_diff_summary(len(changes), len(decisive(changes))))
    if exit_code and decisive(changes):
        raise typer.Exit(EXIT_GATE_FAILED)


def _load_remembered(path: Path) -> Lock:
    """A lock file read as `verify` reads it: its parsed TOML is kept in the cache of its
    project under the sha256 of its bytes (the TOML reader took ~1.2 s of a 1,000-model diff),
    and the document is validated in full either way."""
    from baseline.project.lockfile import load_lock
    from baseline.project.paths import find_project_root
    from baseline.verification.cache import ParsedLock, cache_root, ignore_in_git

    root = cache_root(find_project_root(path.resolve().parent))
    ignore_in_git(root)
    return load_lock(path, ParsedLock(root, path))


def _diff_summary(total: int, counted: int) -> str:
    if not total:
        return "no changes"
    if counted == total:
        return f"{total} changes"
    return f"{counted} changes, {total - counted} information only"


def accept(
    model: Annotated[str, typer.Argument(help="The model whose change is intended.")],
    reason: Annotated[str, typer.Option("--reason", help="Why the change is intended (recorded).")],
    lock: LockOption = Path("baseline.lock"),
    config: ConfigOption = None,
    root: RootOption = None,
) -> None:
    """Take an intended change into the lock, with an audit entry (who, when, why, old → new)."""
    from baseline.project.accept import accept_change
    from baseline.project.layout import Project

    entry = accept_change(Project.locate(lock, config, root), model, reason, output.progress)
    output.line(f"accepted {model} by {entry.author} at {entry.date}: {len(entry.changes)} changes recorded")
    for change in entry.changes[:20]:
        output.line(f"  {escape(change)}")
    if len(entry.changes) > 20:  # all of them are in the lock's audit entry
        output.line(f"  … and {len(entry.changes) - 20} more, recorded in the audit entry of {lock}")
