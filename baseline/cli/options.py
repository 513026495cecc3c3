"""Options and choices shared by several commands, so each is spelled (and documented) once."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Literal

import typer

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
