"""The human report: one line per gate result, failures explained underneath."""

from __future__ import annotations

from typing import TYPE_CHECKING

from baseline.files.textsafe import one_line
from baseline.models.results import GateResult, Report, Status

if TYPE_CHECKING:  # rich: only where styles are shown (a terminal), see `baseline.cli.output`
    from rich.text import Text

STYLES = {
    Status.PASS: "green",
    Status.FAIL: "bold red",
    Status.ERROR: "bold magenta",
    Status.SKIP: "dim",
    Status.XFAIL: "yellow",
}


Line = list[tuple[str, str]]
"""One report line as (text, style) pieces: a 1,000-model report is 3,000+ lines, and building a
rich `Text` for each costs ~60 ms that a pipe or a CI log (no colours) never uses."""


def render_lines(report: Report) -> list[Line]:
    widths = _widths(report.results)
    lines: list[Line] = [[(f"baseline verify {one_line(report.lock)}", "bold")]]
    for result in report.results:
        lines.append(_result_line(result, widths))
        if not result.status.ok:
            lines += [[(f"        {one_line(detail)}", "dim")] for detail in result.details[:20]]
            if len(result.details) > 20:
                lines.append([(f"        … {len(result.details) - 20} more", "dim")])
            if result.hint:
                lines.append([(f"        hint: {one_line(result.hint)}", "cyan")])
    lines += [[(f"warning: {one_line(warning)}", "yellow")] for warning in report.warnings]
    lines.append(_summary(report))
    return lines


def render_text(report: Report) -> list[Text]:
    """Lines of styled text; rich drops the styles when the output is not a terminal."""
    return [styled(line) for line in render_lines(report)]


def styled(line: Line) -> Text:
    from rich.text import Text

    return Text.assemble(*line)


def plain(lines: list[Line]) -> str:
    """The lines without styles, each ending in a newline."""
    return "".join("".join(text for text, _ in line) + "\n" for line in lines)


def _where(result: GateResult) -> str:
    return one_line(result.where)


def _widths(results: list[GateResult]) -> tuple[int, int, int]:
    return (
        max((len(one_line(r.model)) for r in results), default=5),
        max((len(one_line(r.gate)) for r in results), default=4),
        max((len(_where(r)) for r in results), default=1),
    )


def _result_line(result: GateResult, widths: tuple[int, int, int]) -> Line:
    model_width, gate_width, where_width = widths
    return [
        (f"{result.status.value.upper():<6}", STYLES[result.status]),
        (f"  {one_line(result.model):<{model_width}}  {one_line(result.gate):<{gate_width}}  ", ""),
        (f"{_where(result):<{where_width}}  ", "dim"),
        (one_line(result.summary), ""),
    ]


def _summary(report: Report) -> Line:
    counts = ", ".join(f"{count} {status}" for status, count in report.counts().items() if count)
    verdict = "PASSED" if report.passed else "FAILED"
    return [(f"{verdict}: {counts}", "bold green" if report.passed else "bold red")]
