"""Commands that rerun the gates: `verify` and `signoff`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from baseline.cli.boundary import EXIT_GATE_FAILED, EXIT_OK
from baseline.cli.options import (
    AddressOption,
    ConfigOption,
    Executor,
    ExecutorOption,
    JobsOption,
    LockOption,
    ReportFormat,
    RootOption,
    SignoffFormat,
)
from baseline.cli.output import output

if TYPE_CHECKING:
    from baseline.models.results import Report
    from baseline.project.layout import Project


def verify(
    lock: LockOption = Path("baseline.lock"),
    config: ConfigOption = None,
    root: RootOption = None,
    output_format: Annotated[
        ReportFormat, typer.Option("--format", help="Report format.")
    ] = ReportFormat.text,
    output_path: Annotated[
        Path | None,
        typer.Option(
            "--output", help="Write the report to this file (atomically) instead of standard output."
        ),
    ] = None,
    model: Annotated[list[str] | None, typer.Option("--model", help="Only these models.")] = None,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Rerun every gate even if nothing it depends on changed.")
    ] = False,
    jobs: JobsOption = 1,
    executor: ExecutorOption = Executor.local,
    address: AddressOption = None,
    report_url: Annotated[
        str | None, typer.Option(help="With --format markdown: link the full report (e.g. the HTML in CI).")
    ] = None,
) -> None:
    """Rerun every gate against the lock. Exit 0 all pass, 1 a gate failed, 2 bad input."""
    from baseline.project.layout import Project
    from baseline.verification.verify import VerifyOptions, verify_project

    project = Project.locate(lock, config, root)
    options = VerifyOptions(use_cache=not no_cache, jobs=jobs, executor=executor.value, address=address)
    started = time.monotonic()
    with output.job_progress() as on_job:
        report = verify_project(project, model, progress=output.progress, on_job=on_job, options=options)
    seconds = time.monotonic() - started
    _end_helpers()
    if output_format is ReportFormat.text and output_path is None:
        from baseline.report.text import render_lines

        output.lines(render_lines(report))
    else:
        output.emit(render_report(report, output_format, project, report_url, seconds), output_path)
    raise typer.Exit(EXIT_OK if report.passed else EXIT_GATE_FAILED)


def _end_helpers() -> None:
    """The gates are done: the ONNX helpers end while the report is written (reaped at exit)."""
    from baseline.runtime.isolated import HELPERS

    HELPERS.end_idle()


def render_report(
    report: Report,
    output_format: ReportFormat,
    project: Project,
    report_url: str | None = None,
    seconds: float | None = None,
) -> str:
    """The report in a file format; text is the plain (uncoloured) rendering. `seconds`, how
    long the verification took, goes into JUnit's `time`."""
    from baseline import report as renderers

    if output_format is ReportFormat.html:
        from baseline.files.pictures import fixture_pictures
        from baseline.project.lockfile import load_lock
        from baseline.report.html import render_html

        lock = load_lock(project.lock_path)
        return render_html(report, lock, fixture_pictures(project, lock))
    if output_format is ReportFormat.text:
        from baseline.report.text import plain, render_lines

        return plain(render_lines(report))
    if output_format is ReportFormat.markdown:
        from baseline.report.markdown import render_markdown

        return render_markdown(report, report_url)
    if output_format is ReportFormat.junit:
        from baseline.report.junit import render_junit  # ElementTree and a large regex: ~0.03 s

        return render_junit(report, seconds=seconds)
    return renderers.render_json(report)


def signoff(
    lock: LockOption = Path("baseline.lock"),
    config: ConfigOption = None,
    root: RootOption = None,
    previous: Annotated[
        str | None, typer.Option(help="The previous release: a lock file, or a git revision (tag) of --lock.")
    ] = None,
    output_format: Annotated[SignoffFormat, typer.Option("--format", help="Checklist format.")] = "markdown",
    output_path: Annotated[
        Path | None, typer.Option("--output", help="Write the checklist to this file.")
    ] = None,
) -> None:
    """Release sign-off checklist: versions, hashes, gate values vs thresholds, deltas, audit, to-dos.

    Exit 0 when every gate passed, 1 when the sign-off is FAILED (the checklist is written anyway).
    """
    from baseline.project.layout import Project
    from baseline.project.lockfile import load_lock, load_previous_lock
    from baseline.signoff import build_signoff, render_signoff_html, render_signoff_markdown
    from baseline.verification.verify import verify_project

    project = Project.locate(lock, config, root)
    with output.job_progress() as on_job:
        report = verify_project(project, progress=output.progress, on_job=on_job)
    current = load_lock(lock)
    older = load_previous_lock(lock, previous) if previous is not None else None
    sheet = build_signoff(current, report, older)
    if output_format == "html":
        from baseline.files.pictures import fixture_pictures

        pictures = fixture_pictures(project, current)
        output.emit(render_signoff_html(sheet, report, current, pictures), output_path)
    else:
        output.emit(render_signoff_markdown(sheet), output_path)
    # the sheet is written either way (it says what failed); a release script must still stop
    raise typer.Exit(EXIT_OK if sheet.passed else EXIT_GATE_FAILED)
