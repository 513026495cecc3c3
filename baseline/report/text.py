"""The human report: one line per gate result, failures explained underneath."""

from __future__ import annotations

from rich.text import Text

from baseline.models.results import GateResult, Report, Status
from baseline.textsafe import one_line

STYLES = {
    Status.PASS: "green",
    Status.FAIL: "bold red",
    Status.ERROR: "bold magenta",
    Status.SKIP: "dim",
    Status.XFAIL: "yellow",
}


def render_text(report: Report) -> list[Text]:
    """Lines of styled text; rich drops the styles when the output is not a terminal."""
    widths = _widths(report.results)
    lines = [Text(f"baseline verify {one_line(report.lock)}", style="bold")]
    for result in report.results:
        lines.append(_result_line(result, widths))
        if not result.status.ok:
            lines += [Text(f"        {one_line(detail)}", style="dim") for detail in result.details[:20]]
            if len(result.details) > 20:
                lines.append(Text(f"        … {len(result.details) - 20} more", style="dim"))
            if result.hint:
                lines.append(Text(f"        hint: {one_line(result.hint)}", style="cyan"))
    lines += [Text(f"warning: {one_line(warning)}", style="yellow") for warning in report.warnings]
    lines.append(_summary(report))
    return lines


def _where(result: GateResult) -> str:
    return one_line(result.where)


def _widths(results: list[GateResult]) -> tuple[int, int, int]:
    return (
        max((len(one_line(r.model)) for r in results), default=5),
        max((len(one_line(r.gate)) for r in results), default=4),
        max((len(_where(r)) for r in results), default=1),
    )


def _result_line(result: GateResult, widths: tuple[int, int, int]) -> Text:
    model_width, gate_width, where_width = widths
    line = Text()
    line.append(f"{result.status.value.upper():<6}", style=STYLES[result.status])
    line.append(f"  {one_line(result.model):<{model_width}}  {one_line(result.gate):<{gate_width}}  ")
    line.append(f"{_where(result):<{where_width}}  ", style="dim")
    line.append(one_line(result.summary))
    return line


def _summary(report: Report) -> Text:
    counts = ", ".join(f"{count} {status}" for status, count in report.counts().items() if count)
    verdict = "PASSED" if report.passed else "FAILED"
    return Text(f"{verdict}: {counts}", style="bold green" if report.passed else "bold red")
