"""Commands that need neither a lock nor the toolkit: `check` (an ONNX model) and `compat` (a .rknn)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from baseline.cli.boundary import EXIT_GATE_FAILED, EXIT_OK
from baseline.cli.options import FormatOption, OutputFormat
from baseline.cli.output import output
from baseline.files.textsafe import markup_safe as escape
from baseline.files.textsafe import one_line
from baseline.models.intent import DEFAULT_TOOLKIT_VERSION, ToolkitSettings

if TYPE_CHECKING:
    from baseline.report.text import Line
    from baseline.static_check import CheckReport
    from baseline.verification.observations import Observation

DEFAULT_ONNX_TIMEOUT = ToolkitSettings().onnx_timeout


def check(
    onnx_path: Annotated[Path, typer.Argument(metavar="MODEL.onnx", help="The ONNX model.", dir_okay=False)],
    target: Annotated[str, typer.Option(help="Target platform, e.g. rk3588.")] = "rk3588",
    toolkit: Annotated[
        str, typer.Option(help="RKNN-Toolkit2 version to predict for.")
    ] = DEFAULT_TOOLKIT_VERSION,
    shape: Annotated[
        list[str] | None, typer.Option(help="Fix an input's dims: NAME=1,3,224,224 (repeatable).")
    ] = None,
    quantized: Annotated[bool, typer.Option(help="Predict a quantized (w8a8) build, not fp16.")] = False,
    timeout: Annotated[
        float, typer.Option(min=0.001, help="Seconds the check may take (a graph can loop for ever).")
    ] = DEFAULT_ONNX_TIMEOUT,
    output_format: FormatOption = OutputFormat.text,
) -> None:
    """Predict whether RKNN will compile a model, without the toolkit. Exit 0 yes, 1 no or
    unknown (the checker cannot judge it), 2 bad input."""
    from baseline.runtime.isolated import run_limited
    from baseline.static_check import check_model

    report: CheckReport = run_limited(
        check_model,
        # the helper has its own working directory; this machine's conversions are consulted first
        (
            onnx_path.absolute(),
            target,
            toolkit,
            parse_shapes(shape or []),
            None,
            quantized,
            _cache(onnx_path),
        ),
        timeout,
        f"model {str(onnx_path)!r}: the static check",
        "pass --timeout SECONDS if the model is only slow",
    )
    observed = _observed(onnx_path, report, quantized)
    if output_format is OutputFormat.json:
        document = _check_document(onnx_path, report)
        document["observed"] = None if observed is None else dataclasses.asdict(observed)
        output.document(json.dumps(document, indent=2) + "\n")
    else:
        output.lines(_check_lines(onnx_path, report))
        if observed is not None:
            output.line(_observation_line(observed, report))
    compiles = report.predicted_compile if observed is None else observed.compiled
    raise typer.Exit(EXIT_OK if compiles else EXIT_GATE_FAILED)


def _check_lines(onnx_path: Path, report: CheckReport) -> list[Line]:
    """A line per finding and the verdict, printed in one go (`Output.lines`): a rich print per
    finding cost ~0.3 ms, 31 s of a check that found 100,000 of them."""
    lines: list[Line] = [
        [
            (f"{finding.severity.upper():<8}", "bold red" if finding.severity == "error" else "yellow"),
            (f"{one_line(finding.line())}  ", ""),
            (f"({one_line(finding.source)})", "dim"),
        ]
        for finding in report.findings
    ]
    verdict = {
        "compiles": "predicted to compile",
        "fails": "predicted NOT to compile",
        "unknown": f"verdict unknown ({report.reason}; the real compiler decides: baseline lock)",
    }[report.verdict]
    learned = report.learned_from
    summary = (
        f"{one_line(onnx_path)}: {report.nodes} nodes, {verdict} for {one_line(report.target)} "
        f"with toolkit {one_line(report.toolkit)} ({report.seconds * 1000:.0f} ms)"
        + (
            f"; {sum(1 for f in report.findings if f.rule.startswith('learned-'))} node(s) judged by "
            f"this machine's own conversions (of {one_line(', '.join(learned))})"
            if learned
            else ""
        )
    )
    return [*lines, [(summary, "")]]


def _cache(onnx_path: Path) -> Path:
    """The cache folder of the model's project, where `lock` and `verify` record conversions."""
    from baseline.project.paths import cache_root, find_project_root

    return cache_root(find_project_root(onnx_path.resolve().parent)).absolute()


def _observed(onnx_path: Path, report: CheckReport, quantized: bool) -> Observation | None:
    """What a `baseline verify` of this very file saw the real toolkit do (its project's cache):
    the compiler's verdict outranks the prediction, here as in `verify`."""
    from baseline.files.hashing import sha256_file
    from baseline.project.paths import cache_root, find_project_root
    from baseline.verification.observations import FILE_NAME as OBSERVATIONS_FILE
    from baseline.verification.observations import CompileObservations, observation_key

    root = cache_root(find_project_root(onnx_path.resolve().parent))
    if not (root / OBSERVATIONS_FILE).is_file():
        return None
    key = observation_key(sha256_file(onnx_path), report.toolkit, report.target, quantized)
    return CompileObservations(root).get(key)


def _observation_line(observed: Observation, report: CheckReport) -> str:
    outcome = "compiled" if observed.compiled else "did NOT compile"
    agrees = observed.compiled == report.predicted_compile or (
        report.verdict == "unknown" and not observed.compiled
    )
    verdict = "as predicted" if agrees else "the prediction is wrong for this file"
    return (
        f"observed: this file {outcome} for {escape(report.target)} with toolkit "
        f"{escape(report.toolkit)} in `baseline verify` of model {escape(observed.model)!r} on this "
        f"machine ({verdict}; the real compiler's verdict decides the exit code)"
    )


def _check_document(onnx_path: Path, report: CheckReport) -> dict[str, Any]:
    return {
        "model": str(onnx_path),
        "target": report.target,
        "toolkit": report.toolkit,
        "predicted_compile": report.predicted_compile,
        "verdict": report.verdict,
        "reason": report.reason,
        "learned_from": report.learned_from,
        "nodes": report.nodes,
        "seconds": round(report.seconds, 4),
        "findings": [dataclasses.asdict(finding) for finding in report.findings],
    }


def parse_shapes(values: list[str]) -> dict[str, list[int]]:
    """`--shape NAME=1,3,224,224` values as {name: dims}; a malformed one is a usage error."""
    shapes = {}
    for value in values:
        name, _, dims = value.partition("=")
        try:
            shapes[name] = [int(dim) for dim in dims.split(",")]
        except ValueError:
            raise typer.BadParameter(f"--shape {value!r}: expected NAME=1,3,224,224") from None
    return shapes


def compat(
    artifact: Annotated[Path, typer.Argument(help="A .rknn file.", exists=True, dir_okay=False)],
    platform: Annotated[str | None, typer.Option(help="The board's SoC, e.g. rk3588.")] = None,
    runtime: Annotated[str | None, typer.Option(help="librknnrt / librknnmrt version.")] = None,
    driver: Annotated[str | None, typer.Option(help="NPU driver version.")] = None,
    rknn_server: Annotated[str | None, typer.Option(help="rknn_server version.")] = None,
) -> None:
    """Check a shipped .rknn against a board description, offline (no board, no toolkit)."""
    from baseline.compat import BoardVersions, check_platform, check_runtime
    from baseline.files.rknn_file import read_rknn

    metadata = read_rknn(artifact)
    board = BoardVersions("given", runtime=runtime, driver=driver, rknn_server=rknn_server, platform=platform)
    findings = check_runtime(metadata.toolkit_version, board)
    if platform:
        findings += check_platform(platform, metadata.target_platforms)
    output.line(
        f"{escape(str(artifact))}: toolkit {escape(metadata.toolkit_version)}, built for "
        f"{escape(', '.join(metadata.target_platforms) or 'no platform it names')}, "
        f"format {metadata.format_version}"
    )
    for finding in findings:
        style = "bold red" if finding.severity == "fail" else "yellow"
        output.line(f"[{style}]{finding.severity.upper():<6}[/] {escape(finding.line())}")
    failed = any(finding.severity == "fail" for finding in findings)
    output.line("[bold red]INCOMPATIBLE[/]" if failed else "[bold green]COMPATIBLE[/]")
    raise typer.Exit(EXIT_GATE_FAILED if failed else EXIT_OK)
