"""The `baseline` command line. Commands parse, call the library, render, and pick the exit code.

Heavy modules (onnx, onnxruntime, the toolkit) are imported inside commands so that
`baseline --help` stays instant.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
from collections.abc import Callable, Iterator
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, NoReturn

import typer
from rich.console import Console

from baseline.errors import BaselineError
from baseline.textsafe import markup_safe

if TYPE_CHECKING:
    from baseline.executors import ExecutorOptions
    from baseline.models.results import Report
    from baseline.project import Project

EXIT_OK, EXIT_GATE_FAILED, EXIT_BAD_INPUT = 0, 1, 2

app = typer.Typer(
    name="baseline",
    help="Lock and verify ONNX → RKNN model baselines: hashes, versions and output statistics.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

LockOption = Annotated[Path, typer.Option("--lock", help="The lock file.", dir_okay=False)]
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="The intent file (default: next to the lock, same name, .toml).",
        dir_okay=False,
    ),
]
RootOption = Annotated[
    Path | None,
    typer.Option(
        "--root",
        help="Project root that paths are relative to (default: nearest "
        "directory with .git or pyproject.toml).",
        file_okay=False,
    ),
]


class OutputFormat(str, Enum):
    text = "text"
    json = "json"


class Executor(str, Enum):
    local = "local"
    ray = "ray"


class ReportFormat(str, Enum):
    text = "text"
    json = "json"
    junit = "junit"
    markdown = "markdown"
    html = "html"


JobsOption = Annotated[
    int, typer.Option("--jobs", "-j", min=1, help="Jobs run at once on this machine (--executor local).")
]
ExecutorOption = Annotated[
    Executor, typer.Option("--executor", help="Where jobs run: threads here, or tasks on a Ray cluster.")
]
AddressOption = Annotated[
    str | None, typer.Option(help="With --executor ray: the cluster to join (default: start a local one).")
]
SignoffFormat = Literal["markdown", "html"]
FormatOption = Annotated[OutputFormat, typer.Option("--format", help="Output format.")]


def fail_with(error: BaselineError | OSError) -> NoReturn:
    """The one place a user-facing error becomes output: one line, exit code 2."""
    if isinstance(error, OSError):  # permissions, full disks, vanished files outside our own checks
        message = f"{error.filename}: {error.strerror}" if error.filename else str(error)
    else:
        message = str(error)
    err.print(
        f"[bold red]error:[/] {markup_safe(message.splitlines()[0] if message else type(error).__name__)}"
    )
    raise typer.Exit(EXIT_BAD_INPUT)


def report_progress(message: str) -> None:
    """Progress of long steps (toolkit installs) goes to stderr, so JSON on stdout stays clean."""
    err.print(f"[dim]… {message}[/]")


@contextlib.contextmanager
def job_progress() -> Iterator[Callable[[int, int, str], None]]:
    """A progress bar on a terminal; in CI logs, one plain line per model."""
    if err.is_terminal:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        with Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=err, transient=True
        ) as bar:
            task = bar.add_task("verifying", total=None)
            yield lambda done, total, label: bar.update(task, completed=done, total=total, description=label)
        return
    seen: set[str] = set()

    def plain(done: int, total: int, label: str) -> None:
        model = label.split(" ", 1)[0]
        if model not in seen and done < total:
            seen.add(model)
            err.print(f"… [{done}/{total}] {model}", markup=False)

    yield plain


@app.command()
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
) -> None:
    """Measure every model in the intent file and write the lock (only if it changed)."""
    from baseline.executors import ExecutorOptions
    from baseline.project import Project

    options = ExecutorOptions(executor=executor.value, jobs=jobs, address=address)
    try:
        project = Project.locate(lock, config, root)
        if check_only:
            _check_lock(project, options)
            return
        from baseline.locker import lock_project

        outcome = lock_project(project, progress=report_progress, options=options)
    except (BaselineError, OSError) as error:
        fail_with(error)
    models = ", ".join(model.name for model in outcome.lock.models)
    state = "written" if outcome.changed else "unchanged"
    out.print(f"{lock}: {state} ({len(outcome.lock.models)} models: {models})")


def _check_lock(project: Project, options: ExecutorOptions) -> None:
    from baseline.diff import diff_locks
    from baseline.locker import build_lock, stale_files
    from baseline.lockfile import load_lock, render_lock

    fresh, pending = build_lock(project, progress=report_progress, options=options)
    current_text = project.lock_path.read_text() if project.lock_path.is_file() else ""
    files = stale_files(project, pending)
    if render_lock(fresh) == current_text and not files:
        out.print(f"{project.lock_path}: up to date")
        return
    changes = diff_locks(load_lock(project.lock_path), fresh) if current_text else []
    out.print(
        f"{project.lock_path}: would change ({len(changes)} values, {len(files)} files); run `baseline lock`"
    )
    for change in changes[:40]:
        out.print(f"  {markup_safe(change.line())}")
    for path in files:
        out.print(f"  file {path} would be rewritten")
    raise typer.Exit(EXIT_GATE_FAILED)


@app.command()
def diff(
    old: Annotated[Path | None, typer.Argument(help="The older lock (default: --lock at --rev).")] = None,
    new: Annotated[Path | None, typer.Argument(help="The newer lock (default: --lock).")] = None,
    lock: LockOption = Path("baseline.lock"),
    rev: Annotated[
        str | None,
        typer.Option(help="Compare --lock with its version at this git revision (tag, branch, commit)."),
    ] = None,
    output_format: FormatOption = OutputFormat.text,
) -> None:
    """What changed between two locks: versions, hashes, opsets, artifacts, output statistics."""
    from baseline.diff import diff_locks
    from baseline.lockfile import load_lock, lock_at_revision

    try:
        older = load_lock(old) if old is not None else lock_at_revision(lock, rev or "HEAD")
        newer = load_lock(new if new is not None else lock)
    except (BaselineError, OSError) as error:
        fail_with(error)
    changes = diff_locks(older, newer)
    if output_format is OutputFormat.json:
        document = {"changes": [dataclasses.asdict(change) for change in changes]}
        sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
        return
    for change in changes:
        out.print(markup_safe(change.line()))
    out.print(f"{len(changes)} changes" if changes else "no changes")


@app.command()
def accept(
    model: Annotated[str, typer.Argument(help="The model whose change is intended.")],
    reason: Annotated[str, typer.Option("--reason", help="Why the change is intended (recorded).")],
    lock: LockOption = Path("baseline.lock"),
    config: ConfigOption = None,
    root: RootOption = None,
) -> None:
    """Take an intended change into the lock, with an audit entry (who, when, why, old → new)."""
    from baseline.accept import accept_change
    from baseline.project import Project

    try:
        entry = accept_change(Project.locate(lock, config, root), model, reason, report_progress)
    except (BaselineError, OSError) as error:
        fail_with(error)
    out.print(f"accepted {model} by {entry.author} at {entry.date}: {len(entry.changes)} changes recorded")
    for change in entry.changes[:20]:
        out.print(f"  {markup_safe(change)}")


@app.command()
def verify(
    lock: LockOption = Path("baseline.lock"),
    config: ConfigOption = None,
    root: RootOption = None,
    output_format: Annotated[
        ReportFormat, typer.Option("--format", help="Report format.")
    ] = ReportFormat.text,
    output: Annotated[
        Path | None,
        typer.Option(help="Write the report to this file (atomically) instead of standard output."),
    ] = None,
    model: Annotated[list[str] | None, typer.Option("--model", help="Only these models.")] = None,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Rerun every gate even if nothing it depends on changed.")
    ] = False,
    jobs: JobsOption = 1,
    executor: ExecutorOption = Executor.local,
    address: AddressOption = None,
) -> None:
    """Rerun every gate against the lock. Exit 0 all pass, 1 a gate failed, 2 bad input."""
    from baseline.project import Project
    from baseline.verify import VerifyOptions, verify_project

    try:
        project = Project.locate(lock, config, root)
        with job_progress() as on_job:
            report = verify_project(
                project,
                model,
                progress=report_progress,
                on_job=on_job,
                options=VerifyOptions(
                    use_cache=not no_cache, jobs=jobs, executor=executor.value, address=address
                ),
            )
        if output_format is ReportFormat.text and output is None:
            from baseline.report import render_text

            for line in render_text(report):
                out.print(line)
        else:
            _emit(render_report(report, output_format, project), output)
    except (BaselineError, OSError) as error:
        fail_with(error)
    raise typer.Exit(EXIT_OK if report.passed else EXIT_GATE_FAILED)


def render_report(report: Report, output_format: ReportFormat, project: Project) -> str:
    """The report in a file format; text is the plain (uncoloured) rendering."""
    from baseline import report as renderers

    if output_format is ReportFormat.html:
        from baseline.lockfile import load_lock
        from baseline.report.html import render_html

        return render_html(report, load_lock(project.lock_path))
    if output_format is ReportFormat.text:
        return "\n".join(line.plain for line in renderers.render_text(report)) + "\n"
    from baseline.report.junit import render_junit
    from baseline.report.markdown import render_markdown

    render = {
        ReportFormat.json: renderers.render_json,
        ReportFormat.junit: render_junit,
        ReportFormat.markdown: render_markdown,
    }[output_format]
    return render(report)


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    from baseline.fsutil import write_atomic

    write_atomic(output, text.encode())
    err.print(f"report written to {output}", markup=False)


@app.command()
def signoff(
    lock: LockOption = Path("baseline.lock"),
    config: ConfigOption = None,
    root: RootOption = None,
    previous: Annotated[
        str | None, typer.Option(help="The previous release: a lock file, or a git revision (tag) of --lock.")
    ] = None,
    output_format: Annotated[SignoffFormat, typer.Option("--format", help="Checklist format.")] = "markdown",
    output: Annotated[Path | None, typer.Option(help="Write the checklist to this file.")] = None,
) -> None:
    """Release sign-off checklist: versions, hashes, gate values vs thresholds, deltas, audit, to-dos."""
    from baseline.lockfile import load_lock, lock_at_revision
    from baseline.project import Project
    from baseline.signoff import build_signoff, render_signoff_html, render_signoff_markdown
    from baseline.verify import verify_project

    try:
        project = Project.locate(lock, config, root)
        with job_progress() as on_job:
            report = verify_project(project, progress=report_progress, on_job=on_job)
        current = load_lock(lock)
        older = None
        if previous is not None:
            older = (
                load_lock(Path(previous)) if Path(previous).is_file() else lock_at_revision(lock, previous)
            )
        sheet = build_signoff(current, report, older)
        text = (
            render_signoff_html(sheet, report, current)
            if output_format == "html"
            else render_signoff_markdown(sheet)
        )
        _emit(text, output)
    except (BaselineError, OSError) as error:
        fail_with(error)


@app.command()
def check(
    onnx_path: Annotated[Path, typer.Argument(metavar="MODEL.onnx", help="The ONNX model.", dir_okay=False)],
    target: Annotated[str, typer.Option(help="Target platform, e.g. rk3588.")] = "rk3588",
    toolkit: Annotated[str, typer.Option(help="RKNN-Toolkit2 version to predict for.")] = "2.5.0",
    shape: Annotated[
        list[str] | None, typer.Option(help="Fix an input's dims: NAME=1,3,224,224 (repeatable).")
    ] = None,
    output_format: FormatOption = OutputFormat.text,
) -> None:
    """Predict whether RKNN will compile a model, without the toolkit. Exit 0 yes, 1 no, 2 bad input."""
    from baseline.static_check import check_model

    try:
        report = check_model(onnx_path, target=target, toolkit=toolkit, shapes=_parse_shapes(shape or []))
    except (BaselineError, OSError) as error:
        fail_with(error)
    if output_format is OutputFormat.json:
        document = {
            "model": str(onnx_path),
            "target": target,
            "toolkit": toolkit,
            "predicted_compile": report.predicted_compile,
            "nodes": report.nodes,
            "seconds": round(report.seconds, 4),
            "findings": [dataclasses.asdict(finding) for finding in report.findings],
        }
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        for finding in report.findings:
            style = "bold red" if finding.severity == "error" else "yellow"
            out.print(
                f"[{style}]{finding.severity.upper():<8}[/]{markup_safe(finding.line())}  "
                f"[dim]({markup_safe(finding.source)})[/]"
            )
        verdict = "predicted to compile" if report.predicted_compile else "predicted NOT to compile"
        out.print(
            f"{markup_safe(onnx_path)}: {report.nodes} nodes, {verdict} for {markup_safe(target)} "
            f"with toolkit {markup_safe(toolkit)} "
            f"({report.seconds * 1000:.0f} ms)"
        )
    raise typer.Exit(EXIT_OK if report.predicted_compile else EXIT_GATE_FAILED)


def _parse_shapes(values: list[str]) -> dict[str, list[int]]:
    shapes = {}
    for value in values:
        name, _, dims = value.partition("=")
        try:
            shapes[name] = [int(dim) for dim in dims.split(",")]
        except ValueError:
            raise typer.BadParameter(f"--shape {value!r}: expected NAME=1,3,224,224") from None
    return shapes


@app.command()
def compat(
    artifact: Annotated[Path, typer.Argument(help="A .rknn file.", exists=True, dir_okay=False)],
    platform: Annotated[str | None, typer.Option(help="The board's SoC, e.g. rk3588.")] = None,
    runtime: Annotated[str | None, typer.Option(help="librknnrt / librknnmrt version.")] = None,
    driver: Annotated[str | None, typer.Option(help="NPU driver version.")] = None,
    rknn_server: Annotated[str | None, typer.Option(help="rknn_server version.")] = None,
) -> None:
    """Check a shipped .rknn against a board description, offline (no board, no toolkit)."""
    from baseline.compat import BoardVersions, check_platform, check_runtime
    from baseline.rknn_file import read_rknn

    try:
        metadata = read_rknn(artifact)
    except (BaselineError, OSError) as error:
        fail_with(error)
    board = BoardVersions("given", runtime=runtime, driver=driver, rknn_server=rknn_server, platform=platform)
    findings = check_runtime(metadata.toolkit_version, board)
    if platform:
        findings += check_platform(platform, metadata.target_platforms)
    out.print(
        f"{markup_safe(artifact)}: toolkit {markup_safe(metadata.toolkit_version)}, built for "
        f"{markup_safe(', '.join(metadata.target_platforms))}, format {metadata.format_version}"
    )
    for finding in findings:
        style = "bold red" if finding.severity == "fail" else "yellow"
        out.print(f"[{style}]{finding.severity.upper():<6}[/] {markup_safe(finding.line())}")
    failed = any(finding.severity == "fail" for finding in findings)
    out.print("[bold red]INCOMPATIBLE[/]" if failed else "[bold green]COMPATIBLE[/]")
    raise typer.Exit(EXIT_GATE_FAILED if failed else EXIT_OK)


@app.command()
def env(
    device: Annotated[str | None, typer.Option("--device", help="Read this board (adb serial).")] = None,
    record: Annotated[bool, typer.Option(help="Store the board fingerprint in the lock.")] = False,
    lock: LockOption = Path("baseline.lock"),
    output_format: FormatOption = OutputFormat.text,
) -> None:
    """Show the host's toolchains, or a board's NPU software read over adb."""
    from baseline.environment import board_facts, host_facts

    try:
        facts = host_facts() if device is None else board_facts(device)
        if record and device is not None:
            from baseline.board import probe_board
            from baseline.lockfile import record_board

            record_board(lock, probe_board(device))
    except (BaselineError, OSError) as error:
        fail_with(error)
    if output_format is OutputFormat.json:
        sys.stdout.write(json.dumps(facts, indent=2) + "\n")
        return
    for key, value in facts.items():
        out.print(f"{markup_safe(key):<16} {markup_safe(value)}")
    if record and device is not None:
        out.print(f"recorded board {device} in {lock}")


@app.command()
def matrix(
    lock: LockOption = Path("baseline.lock"),
    root: RootOption = None,
    toolkit: Annotated[
        list[str] | None,
        typer.Option("--toolkit", help="Toolkit version (repeatable; default: every version on PyPI)."),
    ] = None,
    model: Annotated[list[str] | None, typer.Option("--model", help="Only these models.")] = None,
    record: Annotated[bool, typer.Option(help="Store the matrix in the lock for the compat gate.")] = False,
    output_format: FormatOption = OutputFormat.text,
    jobs: JobsOption = 1,
    executor: ExecutorOption = Executor.local,
    address: AddressOption = None,
) -> None:
    """Convert and simulate the locked models with several toolkit versions side by side."""
    from baseline.executors import ExecutorOptions
    from baseline.gates.context import VerifyContext
    from baseline.lockfile import load_lock, write_lock
    from baseline.matrix import run_matrix
    from baseline.project import Project
    from baseline.report.matrix import render_matrix_json, render_matrix_table
    from baseline.toolchain.provision import KNOWN_VERSIONS
    from baseline.verify import select_models

    try:
        project = Project.locate(lock, None, root)
        locked = load_lock(lock)
        ctx = VerifyContext(project=project, lock=locked)
        result = run_matrix(
            ctx,
            toolkit or list(KNOWN_VERSIONS),
            select_models(project, locked, model),
            report_progress,
            ExecutorOptions(executor=executor.value, jobs=jobs, address=address),
        )
        if record:
            with project.exclusive():
                write_lock(lock, load_lock(lock).model_copy(update={"matrix": result.cells}))
    except (BaselineError, OSError) as error:
        fail_with(error)
    if output_format is OutputFormat.json:
        sys.stdout.write(render_matrix_json(result))
    else:
        out.print(render_matrix_table(result), width=max(out.width, 160))


@app.command()
def capture(
    model: Annotated[str, typer.Option("--model", help="The model to capture.")],
    target: Annotated[str, typer.Option("--target", help="The target whose .rknn the board runs.")],
    lock: LockOption = Path("baseline.lock"),
    root: RootOption = None,
    bundle_dir: Annotated[
        Path | None, typer.Option("--out", help="Bundle folder (default: the model's capture folder).")
    ] = None,
) -> None:
    """Write the bundle a board runs with Toolkit-Lite2; its outputs feed the rknnlite backend."""
    from baseline.capture import capture_dir, write_bundle
    from baseline.lockfile import load_lock
    from baseline.project import Project

    try:
        project = Project.locate(lock, None, root)
        locked = load_lock(lock)
        bundle = write_bundle(
            project, locked, model, target, bundle_dir or capture_dir(project, locked, model, target)
        )
    except (BaselineError, OSError) as error:
        fail_with(error)
    out.print(f"bundle written to {bundle}")
    out.print(
        f"on the board: adb push {bundle} /data/baseline-capture && "
        "adb shell 'cd /data/baseline-capture && python3 capture.py'"
    )
    out.print(f"then:         adb pull /data/baseline-capture/. {bundle}")


toolchain_app = typer.Typer(help="Install and list pinned RKNN-Toolkit2 environments.")
app.add_typer(toolchain_app, name="toolchain")


@toolchain_app.command("install")
def toolchain_install(
    version: Annotated[str, typer.Argument(help="rknn-toolkit2 version, e.g. 2.5.0.")] = "2.5.0",
    torch: Annotated[
        str | None,
        typer.Option(help="torch requirement (default torch==2.13.0 or $BASELINE_TORCH)."),
    ] = None,
    pip_arg: Annotated[
        list[str] | None, typer.Option("--pip-arg", help="Extra pip argument (repeatable).")
    ] = None,
    force: Annotated[bool, typer.Option(help="Rebuild even if it exists.")] = False,
) -> None:
    """Create the isolated environment for one toolkit version (cached and reused)."""
    from baseline.toolchain.provision import InstallOptions, ensure_toolchain, install_toolchain

    defaults = InstallOptions()
    options = InstallOptions(
        torch=torch or defaults.torch, pip_args=tuple(pip_arg) if pip_arg else defaults.pip_args
    )
    try:
        install = install_toolchain if force else ensure_toolchain
        toolchain = install(version, options, report_progress)
    except (BaselineError, OSError) as error:
        fail_with(error)
    out.print(f"rknn-toolkit2 {toolchain.version}: {toolchain.path}")


@toolchain_app.command("list")
def toolchain_list() -> None:
    """Show the toolkit environments in the cache and what each one holds."""
    from baseline.toolchain.provision import cache_root, list_toolchains

    toolchains = list_toolchains()
    if not toolchains:
        out.print(f"no toolkit environments in {cache_root()}; run `baseline toolchain install`")
    for toolchain in toolchains:
        packages = ", ".join(f"{name} {version}" for name, version in sorted(toolchain.packages.items()))
        out.print(f"{toolchain.version}  python {toolchain.python_version}  {toolchain.path}\n    {packages}")


def main() -> None:
    app()
