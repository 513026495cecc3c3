"""Commands about where models run: `env`, `matrix`, `capture` and `toolchain install|list|remove|prune`."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from baseline.cli.options import (
    AddressOption,
    ConfigOption,
    Executor,
    ExecutorOption,
    FormatOption,
    JobsOption,
    LockOption,
    OutputFormat,
    RootOption,
)
from baseline.cli.output import output
from baseline.files.textsafe import markup_safe as escape
from baseline.models.intent import DEFAULT_TOOLKIT_VERSION


def env(
    device: Annotated[str | None, typer.Option("--device", help="Read this board (adb serial).")] = None,
    record: Annotated[bool, typer.Option(help="Store the board fingerprint in the lock.")] = False,
    lock: LockOption = Path("baseline.lock"),
    output_format: FormatOption = OutputFormat.text,
) -> None:
    """Show the host's toolchains, or a board's NPU software read over adb."""
    from baseline.board.environment import board_facts, host_facts

    facts = host_facts() if device is None else board_facts(device)
    if record and device is not None:
        from baseline.board.software import probe_board
        from baseline.project.lockfile import record_board

        record_board(lock, probe_board(device))
    if output_format is OutputFormat.json:
        output.document(json.dumps(facts, indent=2) + "\n")
        return
    for key, value in facts.items():
        output.line(f"{escape(key):<16} {escape(str(value))}")
    if record and device is not None:
        output.line(f"recorded board {device} in {lock}")


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
    from baseline.project.layout import Project
    from baseline.project.lockfile import load_lock, record_matrix
    from baseline.report.matrix import render_matrix_json, render_matrix_table
    from baseline.toolchain.provision import KNOWN_VERSIONS
    from baseline.verification.matrix import run_matrix
    from baseline.verification.verify import select_models

    project = Project.locate(lock, None, root)
    locked = load_lock(lock)
    result = run_matrix(
        VerifyContext(project=project, lock=locked),
        toolkit or list(KNOWN_VERSIONS),
        select_models(project, locked, model),
        output.progress,
        ExecutorOptions(executor=executor.value, jobs=jobs, address=address),
    )
    if record:
        record_matrix(lock, result.cells)
    if output_format is OutputFormat.json:
        output.document(render_matrix_json(result))
    else:
        output.line(render_matrix_table(result), width=max(output.width, 160))


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
    from baseline.board.capture import capture_dir, write_bundle
    from baseline.project.layout import Project
    from baseline.project.lockfile import load_lock

    project = Project.locate(lock, None, root)
    locked = load_lock(lock)
    bundle = write_bundle(
        project, locked, model, target, bundle_dir or capture_dir(project, locked, model, target)
    )
    output.line(f"bundle written to {bundle}")
    output.line(
        f"on the board: adb push {bundle} /data/baseline-capture && "
        "adb shell 'cd /data/baseline-capture && python3 capture.py'"
    )
    output.line(f"then:         adb pull /data/baseline-capture/. {bundle}")


def toolchain_install(
    version: Annotated[
        str, typer.Argument(help="rknn-toolkit2 version, e.g. 2.5.0.")
    ] = DEFAULT_TOOLKIT_VERSION,
    torch: Annotated[
        str | None,
        typer.Option(
            help="torch requirement (default torch==2.13.0 or $BASELINE_TORCH), or `stub` for "
            "baseline's 0.9 GB smaller stand-in (some models' builds need the real torch)."
        ),
    ] = None,
    pip_arg: Annotated[
        list[str] | None, typer.Option("--pip-arg", help="Extra pip argument (repeatable).")
    ] = None,
    force: Annotated[bool, typer.Option(help="Rebuild even if it exists.")] = False,
) -> None:
    """Create the isolated environment for one toolkit version (cached and reused)."""
    from baseline.toolchain.provision import InstallOptions, ensure_toolchain, install_toolchain

    defaults = InstallOptions()
    options = replace(
        defaults,
        torch=torch or defaults.torch,
        pip_args=tuple(pip_arg) if pip_arg else defaults.pip_args,
    )
    install = install_toolchain if force else ensure_toolchain
    toolchain = install(version, options, output.progress)
    output.line(f"rknn-toolkit2 {toolchain.version}: {toolchain.path}")


def toolchain_list() -> None:
    """Show the toolkit environments in the cache and what each one holds."""
    from baseline.toolchain.provision import MARKER, cache_root, half_built, list_toolchains

    toolchains = list_toolchains()
    for folder in half_built():
        # its marker is missing, unreadable or malformed: never used, rebuilt on demand
        output.line(
            f"{escape(str(folder))}: half-built (no valid {MARKER}); it is rebuilt when needed, "
            "`baseline toolchain prune` removes it"
        )
    if not toolchains:
        output.line(f"no toolkit environments in {cache_root()}; run `baseline toolchain install`")
    for toolchain in toolchains:
        packages = ", ".join(f"{name} {version}" for name, version in sorted(toolchain.packages.items()))
        heading = f"{toolchain.version}  python {toolchain.python_version}  {toolchain.path}"
        output.line(f"{escape(heading)}\n    {escape(packages)}")


def toolchain_remove(
    versions: Annotated[list[str], typer.Argument(help="rknn-toolkit2 versions to delete.")],
) -> None:
    """Delete toolkit environments from the cache (rebuilt on demand when a lock needs them again)."""
    from baseline.toolchain.provision import environment_dir, environments, remove_environment

    for version in versions:
        # every Python's environment for that version (the folder name ends in -pyXY)
        folders = [p for p in environments() if p.name.startswith(environment_dir(version).name[:-4])]
        if not folders:
            output.line(f"rknn-toolkit2 {version}: no environment in the cache")
        for folder in folders:
            output.line(f"removed {folder} ({_gigabytes(remove_environment(folder))})")


def toolchain_prune(
    lock: LockOption = Path("baseline.lock"),
    config: ConfigOption = None,
    keep: Annotated[
        list[str] | None, typer.Option("--keep", help="Also keep this toolkit version (repeatable).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would go; delete nothing.")] = False,
) -> None:
    """Delete half-built environments and those of toolkit versions the intent file does not use."""
    from baseline.toolchain.provision import (
        environment_version,
        environments,
        folder_size,
        remove_environment,
    )

    wanted = _versions_in_use(lock, config, required=not keep) | set(keep or [])
    freed = 0
    for folder in environments():
        version = environment_version(folder)
        if version in wanted:
            continue
        reason = "half-built" if version is None else f"rknn-toolkit2 {version} is not used"
        size = folder_size(folder) if dry_run else remove_environment(folder)
        freed += size
        output.line(f"{'would remove' if dry_run else 'removed'} {folder} ({reason}; {_gigabytes(size)})")
    kept = ", ".join(sorted(wanted)) or "none"
    output.line(f"{'would free' if dry_run else 'freed'} {_gigabytes(freed)}; kept toolkit versions: {kept}")


def _versions_in_use(lock: Path, config: Path | None, required: bool) -> set[str]:
    """The toolkit versions the project's intent file names (every model's, whatever its backends).

    Without an intent file that is an error unless `--keep` named what to keep (`required`).
    """
    from baseline.errors import ConfigError
    from baseline.project.intent import load_intent, resolve_models
    from baseline.project.layout import Project

    project = Project.locate(lock, config)
    if not project.intent_path.is_file():
        if not required:
            return set()
        raise ConfigError(
            f"{project.intent_path}: intent file not found, so prune cannot tell which toolkits are in use; "
            "pass --lock (or --config), or name the versions to keep with --keep"
        )
    return {model.toolkit.version for model in resolve_models(load_intent(project.intent_path))}


def _gigabytes(size: int) -> str:
    return f"{size / 1e9:.2f} GB"
