"""The `baseline` command line. Commands parse, call the library, render, and pick the exit code.

Heavy modules (onnx, onnxruntime, the toolkit) are imported inside commands so that
`baseline --help` stays instant.
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from baseline.errors import BaselineError

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


def fail_with(error: BaselineError) -> NoReturn:
    """The one place a user-facing error becomes output: one line, exit code 2."""
    err.print(f"[bold red]error:[/] {error}", markup=True)
    raise typer.Exit(EXIT_BAD_INPUT)


@app.command()
def lock(
    lock: LockOption = Path("baseline.lock"),
    config: ConfigOption = None,
    root: RootOption = None,
) -> None:
    """Measure every model in the intent file and write the lock (only if it changed)."""
    from baseline.locker import lock_project
    from baseline.project import Project

    try:
        outcome = lock_project(Project.locate(lock, config, root))
    except BaselineError as error:
        fail_with(error)
    models = ", ".join(model.name for model in outcome.lock.models)
    state = "written" if outcome.changed else "unchanged"
    out.print(f"{lock}: {state} ({len(outcome.lock.models)} models: {models})")


@app.command()
def verify(
    lock: LockOption = Path("baseline.lock"),
    config: ConfigOption = None,
    root: RootOption = None,
    output_format: Annotated[
        OutputFormat, typer.Option("--format", help="Report format.")
    ] = OutputFormat.text,
    model: Annotated[list[str] | None, typer.Option("--model", help="Only these models.")] = None,
) -> None:
    """Rerun every gate against the lock. Exit 0 all pass, 1 a gate failed, 2 bad input."""
    from baseline.project import Project
    from baseline.report import render_json, render_text
    from baseline.verify import verify_project

    try:
        report = verify_project(Project.locate(lock, config, root), model)
    except BaselineError as error:
        fail_with(error)
    if output_format is OutputFormat.json:
        sys.stdout.write(render_json(report))
    else:
        for line in render_text(report):
            out.print(line)
    raise typer.Exit(EXIT_OK if report.passed else EXIT_GATE_FAILED)


def main() -> None:
    app()
