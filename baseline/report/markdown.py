"""The pull-request comment: a verdict, a table of every result, the failures explained."""

from __future__ import annotations

import html

from baseline.models.results import GateResult, Report, Status

MAX_DETAILS = 20
"""Detail lines shown per failure; the rest are counted."""
MAX_CELL = 200
"""Characters of a summary in the table; the failure's section below has everything."""


def render_markdown(report: Report) -> str:
    """Markdown for a pull-request comment (GitHub / GitLab flavour)."""
    lines = [verdict_line(report), "", f"lock: `{escape_text(report.lock)}`", ""]
    lines += [
        "| status | model | gate | backend / target | summary |",
        "|---|---|---|---|---|",
    ]
    lines += [_row(result) for result in report.results]
    for result in report.results:
        if result.status in (Status.FAIL, Status.ERROR):
            lines += ["", *_failure(result)]
    if report.warnings:
        lines += ["", *(f"> **warning:** {escape_text(warning)}" for warning in report.warnings)]
    return "\n".join(lines) + "\n"


def verdict_line(report: Report) -> str:
    """`**PASSED** — 30 pass, 1 skip, 3 xfail` (only the statuses that occur)."""
    counts = ", ".join(f"{count} {status}" for status, count in report.counts().items() if count)
    verdict = "PASSED" if report.passed else "FAILED"
    return f"### baseline verify: **{verdict}** — {counts or 'no results'}"


def status_label(status: Status) -> str:
    return f"**{status.value.upper()}**" if not status.ok else status.value.upper()


def escape_text(text: str) -> str:
    """User text safe in Markdown: no HTML the renderer would swallow, no line breaks."""
    return " ".join(html.escape(text, quote=False).split())


def escape_cell(text: str, limit: int | None = None) -> str:
    """Text for a table cell: escaped, `|` escaped so it cannot split the row, optionally cut."""
    text = " ".join(text.split())
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return escape_text(text).replace("|", "\\|")


def _row(result: GateResult) -> str:
    cells = [
        status_label(result.status),
        escape_cell(result.model),
        escape_cell(result.gate),
        escape_cell(result.where),
        escape_cell(result.summary, MAX_CELL),
    ]
    return "| " + " | ".join(cells) + " |"


def _failure(result: GateResult) -> list[str]:
    title = f"{result.status.value.upper()} {result.model} {result.gate} {result.where}"
    lines = [f"<details><summary><b>{escape_text(title)}</b></summary>", "", escape_text(result.summary), ""]
    lines += [f"- {escape_text(detail)}" for detail in result.details[:MAX_DETAILS]]
    if len(result.details) > MAX_DETAILS:
        lines.append(f"- … {len(result.details) - MAX_DETAILS} more")
    if result.hint:
        lines += ["", f"**hint:** {escape_text(result.hint)}"]
    return [*lines, "", "</details>"]
