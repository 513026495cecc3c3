"""The `baseline` command line. Commands parse, call the library, render, and pick the exit code.

Layout: `output` prints, `boundary` turns errors into exit code 2, `options` holds the shared
options, and one module per family of commands holds their bodies; this module registers them
in the order `baseline --help` lists them. Heavy modules (onnx, onnxruntime, the toolkit) are
imported inside commands so that `baseline --help` stays instant.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import sys
import threading
from typing import Annotated, NoReturn

import typer

from baseline.cli import exploring, locks, offline, starter, toolkits, verifying
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
    starter.init,
    locks.lock,
    locks.diff,
    locks.accept,
    verifying.verify,
    verifying.signoff,
    exploring.explore,
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
    """The `baseline` command. It ends the process: see `_exit_now`."""
    # A command builds ~1M small objects that live until it ends (a 1,000-model lock, its
    # results) and holds few reference cycles: the cyclic collector only re-walked them, ~0.1 s
    # of a 1 s cached verify even with a raised threshold. Without it, a cold verify of 1,000
    # models peaked at 129 MB against 127 MB with it.
    gc.disable()
    install_signal_handlers()
    try:
        app()
    except SystemExit as done:
        if _nothing_else_running():
            _exit_now(done.code)
        raise
    finally:
        gc.enable()  # profiled, or an error typer did not turn into an exit: as Python would


def _nothing_else_running() -> bool:
    """Whether the process may end without Python's own shutdown: no profiler or tracer (they
    write at teardown) and no other thread that Python would wait for (jobs still running when
    a signal stopped the command end in their own way, before the exit handlers run)."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return False
    main = threading.main_thread()
    return all(thread is main or thread.daemon for thread in threading.enumerate())


def _exit_now(code: object) -> NoReturn:
    """End the process without tearing the interpreter down object by object: that took
    ~0.4 s of CPU after a cached verify of 1,000 models had printed its report. What an
    orderly exit does that matters is still done: exit handlers (toolkit workers, ONNX
    helpers, scratch folders, Ray) run and the output is flushed. Every file baseline writes
    is closed (and renamed into place) before the command returns."""
    status = code if isinstance(code, int) else 0 if code is None else 1
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)  # as Python does for `sys.exit("message")`
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe (`| head`), a closed stream
            stream.flush()
    os._exit(status)
