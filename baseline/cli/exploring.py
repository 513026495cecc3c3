"""`baseline explore`: where a quantized target loses accuracy, and the remedies that restore it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from baseline.cli.options import ConfigOption, Executor, ExecutorOption, JobsOption, LockOption, RootOption
from baseline.cli.output import output
from baseline.files.textsafe import markup_safe as escape


def explore(
    model: Annotated[str, typer.Argument(help="The locked model whose quantized target to explore.")],
    target: Annotated[
        str, typer.Option("--target", "-t", help="Its quantized target, as the intent names it.")
    ],
    lock: LockOption = Path("baseline.lock"),
    config: ConfigOption = None,
    root: RootOption = None,
    jobs: JobsOption = 1,
    executor: ExecutorOption = Executor.local,
    candidate_timeout: Annotated[
        float | None,
        typer.Option(
            min=0.1,
            help="Seconds each candidate's conversion and run may take (default: the toolkit's "
            "timeout). mmse takes 11-33x the plain build.",
        ),
    ] = None,
) -> None:
    """Where a quantized build loses accuracy, and which toolkit setting restores it (writes nothing)."""
    from baseline.executors import ExecutorOptions
    from baseline.project.layout import Project
    from baseline.project.lockfile import load_lock
    from baseline.toolchain.provision import ensure_toolchains
    from baseline.verification.explore import explore as run_exploration

    project = Project.locate(lock, config, root)
    locked = load_lock(project.lock_path)
    entry = locked.model(model)
    if entry is not None:
        ensure_toolchains({entry.toolkit.version}, output.progress)
    output.progress(f"exploring {model} {target}: each candidate is a real conversion and simulator run")
    found = run_exploration(
        project,
        locked,
        model,
        target,
        ExecutorOptions(executor=executor.value, jobs=jobs),
        output.progress,
        candidate_timeout,
    )
    for line in report_lines(found):
        output.line(escape(line))


def report_lines(found: object) -> list[str]:
    from baseline.verification.explore import Exploration, dropping_layers, timed_out

    assert isinstance(found, Exploration)
    lines = [
        f"where {found.target.name} loses accuracy (the toolkit's per-layer analysis, first fixture sample):"
    ]
    if found.analysis_error is not None:
        lines.append(f"  the analysis could not run: {found.analysis_error}")
    for layer in dropping_layers(found.layers):
        lines.append(f"  {layer.line()}")
    if not found.layers and found.analysis_error is None:
        lines.append("  no layer reported")
    if found.collapsed:
        lines.append(f"and in {found.target.name}'s outputs as locked (every fixture sample):")
        lines += [f"  {line}" for line in found.collapsed]
    lines.append(
        "candidates (each converted and run on the simulator, judged against onnxruntime with what an "
        f"fp16 build must meet: {_bar(found)}):"
    )
    labelled = any(result.labels for result in found.results)
    header = "  candidate | convert + run s | .rknn KB | min cosine | task | as float"
    lines.append(header + (" | against labels (onnxruntime)" if labelled else ""))
    for result in found.results:
        lines.append("  " + _row(result))
    if any(timed_out(result) for result in found.results):
        lines.append(
            f"each candidate had {round(found.candidate_limit, 1):g} s: `--candidate-timeout SECONDS` "
            "gives the stopped ones longer (or shorter, to skip them sooner)"
        )
    best = found.best
    if found.results and found.results[0].as_float:
        lines.append(
            f"{found.target.name} as locked already meets what an fp16 build meets: nothing to restore "
            "(the other rows are for comparison)"
        )
    elif best is None:
        lines.append(
            f"none of the {len(found.results) - 1} candidates brings {found.target.name} to what an fp16 "
            "build meets; see the numbers above"
        )
        lines += _closest(found)
    else:
        lines += _remedy(best, found)
        others = [r.candidate.label for r in found.restoring if r is not best]
        if others:
            lines.append(f"also restores it: {'; '.join(others)} (see the table)")
        lines.append("then `baseline lock` (explore wrote nothing)")
    return lines


def _closest(found: object) -> list[str]:
    """Where nothing meets the fp16 bar, the candidate nearest it, if it clears the floor `lock`
    holds a quantized build to (kelp-o-matic's LRASPP on rv1106: 0.856 as locked, below it, and
    kl_divergence 0.923, above: that build locks, judged at its own spread, with no expect_fail)."""
    from baseline.models.calibration import MEASURED_COSINE_FLOOR
    from baseline.verification.explore import Exploration, intent_line

    assert isinstance(found, Exploration)
    locked, *candidates = found.results
    scored = [r for r in candidates if r.min_cosine is not None and r.candidate.cut is None]
    if not scored:
        return []
    closest = max(scored, key=lambda r: r.min_cosine or 0.0)
    cosine = closest.min_cosine or 0.0
    if cosine < MEASURED_COSINE_FLOOR or cosine <= (locked.min_cosine or 0.0):
        return []
    return [
        f"closest: {closest.candidate.label} (min cosine {cosine:.6f}), above the {MEASURED_COSINE_FLOOR:g} "
        "`lock` holds a quantized build to: with it the target locks without expect_fail, its limits "
        "measured at its own spread; in the intent, the target becomes",
        f"  {intent_line(closest.candidate.target, found.target.name)}",
    ]


def _remedy(best: object, found: object) -> list[str]:
    """The intent lines that take the best candidate: the target's line, or for a graph cut the
    model-wide `load_onnx` outputs and the detection task reading the parts (every target cut)."""
    from baseline.verification.explore import CandidateResult, Exploration, cut_lines, intent_line

    assert isinstance(best, CandidateResult) and isinstance(found, Exploration)
    if best.candidate.cut is None:
        return [
            f"restores it: {best.candidate.label}; in the intent, the target becomes",
            f"  {intent_line(best.candidate.target, found.target.name)}",
        ]
    lines = [
        f"restores it: {best.candidate.label}, model-wide (every target, and onnxruntime, return the parts):"
    ]
    return lines + [f"  {line}" for line in cut_lines(best.candidate.cut)]


def _bar(found: object) -> str:
    from baseline.verification.explore import Exploration

    assert isinstance(found, Exploration)
    if found.results and found.results[0].tasks:
        return "every task with its [models.tasks.golden] thresholds"
    return "every output's cosine at least its fp16 min_cosine"


def _row(result: object) -> str:
    from baseline.verification.explore import CandidateResult

    assert isinstance(result, CandidateResult)
    label = result.candidate.label
    if result.error is not None:
        return f"{label} | not built: {result.error}"
    seconds = f"{result.seconds:.1f}" if result.seconds is not None else "?"
    size = f"{result.size / 1024:.0f}" if result.size is not None else "?"
    cosine = f"{result.min_cosine:.6f}" if result.min_cosine is not None else "?"
    tasks = "; ".join(outcome.summary for outcome in result.tasks) or "no task"
    row = f"{label} | {seconds} | {size} | {cosine} | {tasks} | {'yes' if result.as_float else 'no'}"
    return row + (f" | {_label_scores(result)}" if result.labels else "")


def _label_scores(result: object) -> str:
    """`mAP@0.5 0.347 (0.290)`: the candidate's accuracy against the labels, onnxruntime's beside it."""
    from baseline.models.labels import metric_text
    from baseline.verification.explore import CandidateResult

    assert isinstance(result, CandidateResult)
    floats = {(s.task, metric): value for s in result.float_labels for metric, value in s.metrics.items()}
    return "; ".join(
        f"{metric_text(metric, value)} ({floats[(score.task, metric)]:.3f})"
        if (score.task, metric) in floats
        else metric_text(metric, value)
        for score in result.labels
        for metric, value in score.metrics.items()
    )
