"""The one place where a user-facing error becomes output: one line on stderr, exit code 2.

Commands raise `BaselineError` (bad input, stale lock, missing toolkit) or let an `OSError`
through (permissions, full disks, files vanishing outside our own checks); the app's group
class catches both around every command, so no command needs its own try/except.
"""

from __future__ import annotations

import errno
import shutil
import signal
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

import typer
from typer.core import TyperGroup

from baseline.cli.output import output
from baseline.errors import BaselineError
from baseline.runtime import children

EXIT_OK, EXIT_GATE_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class Terminated(BaseException):
    """SIGTERM, raised in the main thread like KeyboardInterrupt is for SIGINT."""


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated


_process_ends_with_command = False
"""True under `main()`: a stopped command ends the process, so `children` stays closed to the
job threads still unwinding. Run in-process (tests), later commands and calls must work."""


def install_signal_handlers() -> None:
    """SIGTERM unwinds like Ctrl-C does (Python's default would end the process at once and
    leave every worker, in its own session, running)."""
    global _process_ends_with_command
    _process_ends_with_command = True
    signal.signal(signal.SIGTERM, _terminate)


class ErrorBoundary(TyperGroup):
    """The top-level command group; subcommands' errors propagate up through its `invoke`."""

    def invoke(self, ctx: Any) -> Any:  # typer's vendored click Context; its module is private
        try:
            return super().invoke(ctx)
        except (BaselineError, OSError) as error:
            fail_with(error)
        except (KeyboardInterrupt, Terminated) as stop:
            stopped(signal.SIGTERM if isinstance(stop, Terminated) else signal.SIGINT)


def stopped(signum: signal.Signals) -> NoReturn:
    """Queued jobs were dropped on the way here; end the running ones' workers, remove scratch."""
    children.cancel_all()
    if not _process_ends_with_command:
        children.resume()
    output.error(f"stopped by {signum.name}: worker processes killed, temporary files removed")
    raise typer.Exit(128 + signum)


def fail_with(error: BaselineError | OSError) -> NoReturn:
    output.error(one_line(error))
    raise typer.Exit(EXIT_BAD_INPUT)


def one_line(error: BaselineError | OSError) -> str:
    if isinstance(error, OSError):
        message = f"{error.filename}: {error.strerror}" if error.filename else _unnamed(error)
    else:
        message = str(error)
    return message.splitlines()[0] if message else type(error).__name__


FULL_BELOW = 64 << 20
"""Free bytes under which a disk counts as the full one."""


def _unnamed(error: OSError) -> str:
    """An OS error that names no file: a full disk is the common one (a write, not an open,
    fails), so say which folder is full and what to do."""
    if error.errno not in (errno.ENOSPC, errno.EDQUOT):
        return str(error)
    places = {"the temporary folder": Path(tempfile.gettempdir()), "the working folder": Path.cwd()}
    full = [f"{what} {path}" for what, path in places.items() if _free(path) < FULL_BELOW]
    where = " and ".join(full) or " or ".join(f"{what} {path}" for what, path in places.items())
    return (
        f"no space left on the disk of {where} ({error.strerror}); free space there, or point "
        "TMPDIR at a larger disk"
    )


def _free(path: Path) -> int:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return FULL_BELOW
