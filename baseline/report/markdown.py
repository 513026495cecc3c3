"""The pull-request comment: a verdict, the failures first and explained, the passes collapsed.

GitHub refuses a comment over 65,536 characters, and a few dozen failing models with long
logs exceed that: the comment is cut at `MAX_CHARS`, failures kept before passes, with a line
saying what was left out and where the whole report is.
"""

from __future__ import annotations

import html

from baseline.models.results import GateResult, Report, Status

MAX_DETAILS = 20
"""Detail lines shown per failure; the rest are counted."""
MAX_CELL = 200
"""Characters of a summary in the table; the failure's section below has everything."""
MAX_CHARS = 60_000
"""The comment's size cap: under GitHub's 65,536, with room for a bot's own header."""
HEADER = ["| status | model | gate | backend / target | summary |", "|---|---|---|---|---|"]


class _Comment:
    """Lines added block by block while they fit; what does not fit is counted, not shown."""

    def __init__(self, limit: int) -> None:
        self.lines: list[str] = []
        self.size = 0
        self.limit = limit
        self.left_out = 0

    def add(self, block: list[str]) -> bool:
        size = sum(len(line) + 1 for line in block)
        if self.left_out or self.size + size > self.limit:
            self.left_out += 1
            return False
        self.lines += block
        self.size += size
        return True


def render_markdown(report: Report, report_url: str | None = None, limit: int = MAX_CHARS) -> str:
    """Markdown for a pull-request comment (GitHub / GitLab flavour), at most `limit` characters."""
    where = f"lock: `{escape_text(report.lock)}`"
    if report_url:
        # the CI job's own address (a command-line option, not a pull request's text): a live link
        where += f" · [full report]({html.escape(report_url).replace(')', '%29').replace(' ', '%20')})"
    failing = [result for result in report.results if result.status in (Status.FAIL, Status.ERROR)]
    others = [result for result in report.results if result not in failing]
    comment = _Comment(limit - 400)  # the closing note always fits
    comment.add([verdict_line(report), "", where, ""])
    if failing:
        comment.add(HEADER)
        shown = sum(comment.add([_row(result)]) for result in failing)
        for result in failing[:shown]:
            comment.add(["", *_failure(result)])
    if others and comment.add(["", f"<details><summary>{_tally(others)}</summary>", "", *HEADER]):
        for result in others:
            comment.add([_row(result)])
        comment.lines += ["", "</details>"]  # outside the budget: the margin keeps room for it
    lines = comment.lines
    if report.warnings:
        lines += ["", *(f"> **warning:** {escape_text(warning)}" for warning in report.warnings)]
    if comment.left_out:
        lines += ["", f"*The rest of the report is left out: a comment is limited to {limit:,} characters.*"]
    return "\n".join(lines) + "\n"


def _tally(results: list[GateResult]) -> str:
    """`30 pass, 1 skip, 3 xfail` for the collapsed section's title."""
    counts: dict[str, int] = {}
    for result in results:
        counts[result.status.value] = counts.get(result.status.value, 0) + 1
    return ", ".join(f"{count} {status}" for status, count in counts.items())


def verdict_line(report: Report) -> str:
    """`**PASSED** — 30 pass, 1 skip, 3 xfail` (only the statuses that occur)."""
    counts = ", ".join(f"{count} {status}" for status, count in report.counts().items() if count)
    verdict = "PASSED" if report.passed else "FAILED"
    return f"### baseline verify: **{verdict}** — {counts or 'no results'}"


def status_label(status: Status) -> str:
    return f"**{status.value.upper()}**" if not status.ok else status.value.upper()


def escape_text(text: str) -> str:
    """Text a pull request controls (model and output names, summaries, the team's messages), safe
    in a rendered comment: no HTML the renderer would swallow, no line breaks, no link or image
    (`[` and `]` escaped), no live `@mention` or autolinked URL (a word joiner, which shows as
    nothing, after `@` and inside `://` and `www.`). A code span is left alone: it is inert."""
    text = " ".join(html.escape(text, quote=False).split())
    text = text.translate(MARKDOWN_ESCAPES)
    for live, inert in INERT.items():
        text = text.replace(live, inert)
    return text


MARKDOWN_ESCAPES = str.maketrans({"[": "\\[", "]": "\\]"})
WORD_JOINER = "\u2060"
INERT = {"@": "@" + WORD_JOINER, "://": ":" + WORD_JOINER + "//", "www.": "www" + WORD_JOINER + "."}
"""What GitHub turns into a mention or a link after rendering, broken by an invisible character."""


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
