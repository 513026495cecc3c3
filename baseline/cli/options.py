"""Options and choices shared by several commands, so each is spelled (and documented) once."""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path
from typing import Annotated, Literal

import typer


def _lock_from_parents(ctx: typer.Context, param: typer.CallbackParam, value: Path) -> Path:
    """Without `--lock`, the lock is looked for from the current folder up, as git finds its
    repository, so a command run in a subfolder of the project finds it. Not when `--config` or
    `--root` is given (click processes those first when they are on the command line): the
    default lock then belongs to them, here, as before."""
    source = ctx.get_parameter_source(param.name or "")
    if source is None or source.name != "DEFAULT":  # by name: typer 0.29 carries its own click
        return value
    if ctx.params.get("config") is not None or ctx.params.get("root") is not None:
        return value
    from baseline.project.paths import find_lock

    found = find_lock(Path.cwd())
    if found is None or found.parent == Path.cwd().absolute():
        return value
    return Path(os.path.relpath(found))


LockOption = Annotated[
    Path,
    typer.Option(
        "--lock",
        help="The lock file (default: baseline.lock in the nearest folder, from here up, holding "
        "baseline.lock or baseline.toml).",
        dir_okay=False,
        callback=_lock_from_parents,
    ),
]
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
