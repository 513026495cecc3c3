"""The `baseline` command's entry point: starts the ONNX helper early for a cold verify.

A cold verify waits mostly on the ONNX helper (onnx and onnxruntime imports, then the static
check and the golden run, see `baseline.runtime.isolated`). The CLI's own start-up (typer, pydantic,
the lock models: ~0.3 s) used to come first, and the helper started only once the lock was
read and the cache asked. When the arguments already say that a verify on this machine will
rerun its gates, the helper starts here instead: this process imports what both need (numpy,
baseline's models) and forks the helper from itself, before any thread runs, so the helper
imports only onnx and onnxruntime, on another core, while the CLI starts. Anything the
arguments leave unclear starts nothing here: the helper then starts as before (a new
interpreter), once the cache has been asked. A helper started here and never used is reaped
at exit, like any other (`baseline.runtime.children`).

When the lock holds one model, the helper is also told at once to build that model's
onnxruntime session (the longest step of its first job): it is built while the CLI imports
and reads the lock (measured: a 54 MB CNN's cold verify 0.73 -> 0.60 s). With several models,
which one runs first is verify's choice (`baseline.verification.verify`), and verify hints it itself."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from baseline.project.paths import RESULTS_FOLDER, cache_root, find_lock, find_project_root

DEFAULT_LOCK = "baseline.lock"
SELECTING = ("--lock", "--config", "--root", "--model")
"""Options after which the lock's only model may not be what the verify checks."""


def main() -> None:
    # pydantic looks for plugins in every installed distribution's entry points when it builds
    # its first model (~0.05 s of a command's start-up, more in a large environment). Plugins
    # observe validation; the command's models are baseline's own, so the CLI turns the scan
    # off (inherited by its helpers) unless the user set the variable (empty: plugins on).
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    _printable_anywhere()
    if verifies_cold(sys.argv[1:], Path.cwd()):
        from baseline.runtime import children

        children.limit_blas_threads()  # before numpy loads; the helper is forked with it
        _start_helper(sys.argv[1:])
        _start_spare_helpers(sys.argv[1:])
    elif verifies_in_parallel(sys.argv[1:]):
        from baseline.runtime import children

        # jobs the cache cannot answer run on worker processes only from a process of one
        # thread (`children.safe_to_fork`): OpenBLAS would start a thread per core as numpy loads
        children.limit_blas_threads()
    from baseline.cli import main as cli_main

    cli_main()


def _printable_anywhere() -> None:
    """Lines name models, outputs and files, and say `×` and `→`: on an ASCII or latin-1 terminal
    (`LANG=C`, a CI runner) a character it cannot encode is escaped, never a UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def _start_helper(args: Sequence[str]) -> None:
    """Fork the ONNX helper; for a lock of one model, have it build that model's session."""
    import importlib

    from baseline.runtime.isolated import BUILD_SESSION, HELPERS, SHARED

    importlib.import_module(SHARED)  # the CLI imports it too; the forked helper then has it
    HELPERS.prestart(fork=True)
    if any(_value(args, name) is not None for name in SELECTING):
        return
    only = only_model_file(find_lock(Path.cwd()) or Path(DEFAULT_LOCK))  # the CLI's default lock
    if only is not None:
        HELPERS.hint(BUILD_SESSION, (only,))


def _start_spare_helpers(args: Sequence[str]) -> None:
    """`verify --jobs N`, cold: one more helper per job beyond the first, forked now, for the
    workers `baseline.executors.processes` forks later (each is handed one), or for the jobs'
    threads where workers cannot be forked. Their onnx / onnxruntime imports run on the other
    cores while this process reads the lock and plans (in a worker forked first, they held up
    its first job: ~0.3 s of a 1,000-model zoo's 5.4 s)."""
    from baseline.runtime.isolated import HELPERS

    # no more than the cores can run at once: with a large N, most jobs wait for a core anyway
    for _ in range(min(parallel_jobs(args), os.cpu_count() or 1) - 1):
        HELPERS.prestart_spare()


def verifies_cold(args: Sequence[str], cwd: Path) -> bool:
    """`args` run `verify` on local threads with every gate to rerun: `--no-cache`, or no
    result cache where a verify of the default lock in `cwd` keeps it. Another lock, config or
    root, Ray, or help: no (the CLI decides those itself)."""
    if not args or args[0] != "verify" or "--help" in args:
        return False
    if _value(args, "--executor") not in (None, "local"):
        return False
    if "--no-cache" in args:
        return True
    if any(_value(args, name) is not None for name in ("--lock", "--config", "--root")):
        return False
    return not (cache_root(find_project_root(cwd)) / RESULTS_FOLDER).is_dir()


def verifies_in_parallel(args: Sequence[str]) -> bool:
    """`args` run `verify` on local workers, several at once (`--jobs N`, N > 1)."""
    return parallel_jobs(args) > 1


def parallel_jobs(args: Sequence[str]) -> int:
    """N of `verify --jobs N` on local workers (1 for anything else, or a value the CLI will
    refuse itself)."""
    if not args or args[0] != "verify" or "--help" in args:
        return 1
    if _value(args, "--executor") not in (None, "local"):
        return 1
    jobs = _value(args, "--jobs") or _value(args, "-j")
    return int(jobs) if jobs is not None and jobs.isdigit() and int(jobs) > 1 else 1


def only_model_file(lock: Path) -> Path | None:
    """The ONNX file of the only model in `lock`, confined to the project as verify confines
    it, if it is a regular file of the size the lock pins. None for a lock of several models,
    and for anything odd: the CLI reports that itself, with its own errors."""
    from baseline.errors import BaselineError
    from baseline.files.tomlfile import parse_toml, read_config_bytes
    from baseline.project.layout import Project

    try:
        raw = read_config_bytes(lock, "lock", "")
        if raw.count(b"\n[[models]]\n") != 1:  # a generated lock: one header per model
            return None
        models = parse_toml(raw, lock, "lock", "")["models"]
        if len(models) != 1:
            return None
        pin = models[0]["onnx"]
        path = Project.locate(lock).resolve(pin["path"], "models.onnx", file=True)
        # a regular file of the pinned size: anything else fails integrity, and is never built
        pinned = path.is_file() and path.stat().st_size == pin["size"]
        return path.absolute() if pinned else None
    except (BaselineError, LookupError, TypeError, OSError):
        return None


def _value(args: Sequence[str], name: str) -> str | None:
    """The value of option `name` (`--name value` or `--name=value`), None if absent."""
    for index, arg in enumerate(args):
        if arg == name:
            return args[index + 1] if index + 1 < len(args) else ""
        if arg.startswith(name + "="):
            return arg[len(name) + 1 :]
    return None
