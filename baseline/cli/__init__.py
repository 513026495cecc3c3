"""The `baseline` command line. Commands parse, call the library, render, and pick the exit code.

Layout: `output` prints, `boundary` turns errors into exit code 2, `options` holds the shared
options, and one module per family of commands holds their bodies; this module registers them
in the order `baseline --help` lists them. Heavy modules (onnx, onnxruntime, the toolkit) are
imported inside commands so that `baseline --help` stays instant.
"""

from __future__ import annotations

import gc
from typing import Annotated

import typer

from baseline.cli import locks, offline, toolkits, verifying
from baseline.cli.boundary import (
    EXIT_BAD_INPUT,
    EXIT_GATE_FAILED,
    EXIT_OK,
    ErrorBoundary,
    install_signal_handlers,
)

__all__ = ["EXIT_BAD_INPUT", "EXIT_GATE_FAILED", "EXIT_OK", "app", "main"]

app = typer.Typer(
    name="baseline",
    help="Lock and verify ONNX → RKNN model baselines: hashes, versions and output statistics.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=ErrorBoundary,
)


def show_version(value: bool) -> None:
    if not value:
        return
    from baseline import DISTRIBUTION, __version__
    from baseline.cli.output import output
    from baseline.versions import clashing_distribution

    output.line(f"baseline {__version__} ({DISTRIBUTION})", width=1000)
    clash = clashing_distribution()
    if clash is not None:
        output.error(
            f"another distribution named `baseline` ({clash}) is installed here and writes the same "
            f"`baseline` package: pip uninstall baseline && pip install --force-reinstall {DISTRIBUTION}"
        )
    raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=show_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Lock and verify ONNX → RKNN model baselines: hashes, versions and output statistics."""


for command in (
    locks.lock,
    locks.diff,
    locks.accept,
    verifying.verify,
    verifying.signoff,
    offline.check,
    offline.compat,
    toolkits.env,
    toolkits.matrix,
    toolkits.capture,
):
    app.command()(command)

toolchain_app = typer.Typer(help="Install, list and remove pinned RKNN-Toolkit2 environments.")
toolchain_app.command("install")(toolkits.toolchain_install)
toolchain_app.command("list")(toolkits.toolchain_list)
toolchain_app.command("remove")(toolkits.toolchain_remove)
toolchain_app.command("prune")(toolkits.toolchain_prune)
app.add_typer(toolchain_app, name="toolchain")


def main() -> None:
    # A command builds ~1M small objects that live until it ends (a 1,000-model lock, its
    # results); the cyclic collector re-walked them all, ~20 % of a cached verify. Imported
    # modules are frozen out of collections and the first generation is collected less often.
    gc.freeze()
    gc.set_threshold(20_000, 50, 100)
    install_signal_handlers()
    app()
