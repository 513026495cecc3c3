"""The sign-off rendered: a Markdown checklist, or one self-contained HTML page with plots.

Both renderers share the rows below (plain text); each escapes for its own format.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape

from baseline.files.pictures import PictureSource
from baseline.models.lock import AuditEntry, Lock
from baseline.models.results import Report, Status
from baseline.report.html import distributions_section, layers_section, page
from baseline.report.markdown import escape_cell, escape_text
from baseline.report.tasks import tasks_section
from baseline.signoff.records import GateCheck, ModelRecord, ReleaseChange, Signoff

SHA256 = re.compile("[0-9a-f]{64}")
NO_CONVERSIONS = "no .rknn pinned: the model did not compile for any target when it was locked"


ACCURACY_NOTE = "Accuracy against the labels, as locked (the labels gate fails a build that loses more):"
MEASURED_NOTE = (
    "Measured at lock beyond the intent (two conversions and runs, nothing changed; ×1.5 headroom):"
)


def render_signoff_markdown(signoff: Signoff) -> str:
    """The sign-off as Markdown: `- [x]` for gates that passed, `- [ ]` for what is left."""
    lines = [
        f"# Sign-off: `{escape_text(signoff.lock)}`",
        "",
        _verdict(signoff),
        "",
        "## Pinned versions",
        "",
    ]
    lines += _markdown_table(("component", "version"), _version_rows(signoff))
    lines += ["", "## Models"]
    for model in signoff.models:
        lines += ["", f"### {escape_text(model.name)}", "", escape_text(_model_line(model)), ""]
        if model.conversions:
            lines += _markdown_table(CONVERSION_COLUMNS, _conversion_rows(model))
        else:
            lines.append(NO_CONVERSIONS)
        if model.measured:
            lines += ["", MEASURED_NOTE, ""] + [f"- {escape_text(line)}" for line in model.measured]
        if model.accuracy:
            lines += ["", ACCURACY_NOTE, ""] + [f"- {escape_text(line)}" for line in model.accuracy]
    lines += ["", "## Gates"]
    for name in dict.fromkeys(check.model for check in signoff.gates):
        lines += ["", f"### {escape_text(name)}", ""]
        lines += [
            f"- [{'x' if c.ticked else ' '}] {escape_text(_gate_line(c))}"
            for c in signoff.gates
            if c.model == name
        ]
    lines += ["", "## Changes since the previous lock", ""]
    if signoff.changes:
        lines += _markdown_table(("what", "before", "after"), _change_rows(signoff.changes))
    else:
        lines.append("no previous lock given" if signoff.changes is None else "no changes")
    lines += ["", "## Audit trail", ""]
    lines += [f"- {escape_text(_audit_line(entry))}" for entry in signoff.audit] or ["no audit entries"]
    lines += ["", "## Still to check by hand", ""]
    lines += [f"- [ ] {escape_text(item)}" for item in signoff.manual]
    return "\n".join(lines) + "\n"


def render_signoff_html(
    signoff: Signoff, report: Report, lock: Lock, pictures: PictureSource | None = None
) -> str:
    """The sign-off as one self-contained HTML page, with the report's distribution plots and
    its failed task comparisons (detections drawn on the fixture photographs, with `pictures`)."""
    title = f"Sign-off: {'PASSED' if signoff.passed else 'FAILED'}"
    header = (
        f'<header class="verdict {"passed" if signoff.passed else "failed"}"><h1>{escape(title)}</h1>'
        f"<p>{escape(_counts(signoff))}</p><p><code>{escape(signoff.lock)}</code></p></header>"
    )
    sections = [
        _html_section("Pinned versions", _html_table(("component", "version"), _version_rows(signoff))),
        _html_section("Models", "".join(_html_model(model) for model in signoff.models)),
        _html_section("Gates", _html_gates(signoff.gates)),
        _html_section("Changes since the previous lock", _html_changes(signoff.changes)),
        _html_section("Audit trail", _html_list([_audit_line(e) for e in signoff.audit], "no audit entries")),
        _html_section("Still to check by hand", _html_checklist([(item, False) for item in signoff.manual])),
        tasks_section(report, lock, pictures),
        distributions_section(report, lock),
        layers_section(report, lock),
    ]
    return page(title, header, sections)


# --- rows shared by both renderers: plain text, each renderer escapes ---

CONVERSION_COLUMNS = ("target", "platform", "quantization", "artifact", "sha256", "fingerprint", "toolkit")


def _version_rows(signoff: Signoff) -> list[tuple[str, str]]:
    rows = [(f"host {field}", str(value)) for field, value in signoff.host.model_dump().items()]
    for toolkit in signoff.toolkits:
        packages = ", ".join(f"{name} {version}" for name, version in sorted(toolkit.packages.items()))
        rows.append(
            (
                f"RKNN-Toolkit2 {toolkit.version}",
                f"commit {toolkit.commit or 'unknown'}; python {toolkit.python}; {packages}",
            )
        )
    for board in signoff.boards:
        facts = board.model_dump(exclude={"serial"}, exclude_none=True)
        rows.append((f"board {board.serial}", ", ".join(f"{k} {v}" for k, v in facts.items()) or "observed"))
    return rows


def _model_line(model: ModelRecord) -> str:
    opsets = ", ".join(f"{domain} {version}" for domain, version in sorted(model.opsets.items()))
    return (
        f"ONNX {model.onnx}, sha256 {model.onnx_sha256}, opset {opsets}; toolkit {model.toolkit}; "
        f"{_exporter(model)}"
    )


def _exporter(model: ModelRecord) -> str:
    """The exporter's provenance as the lock has it: declared or not, under git or not, and why."""
    if model.exporter_commit:
        state = "uncommitted changes" if model.exporter_dirty else "clean"
        return f"exporter commit {model.exporter_commit[:12]} ({state})"
    if model.exporter_script is None:
        if model.exporter_command is None:
            return "no exporter declared (exporter.script / exporter.command)"
        return f"exporter command {model.exporter_command!r}, no script declared to trace in git"
    if model.exporter_gap is not None:
        return f"exporter {model.exporter_script}: commit not recorded ({model.exporter_gap})"
    if model.exporter_dirty:
        return f"exporter {model.exporter_script} in a git work tree but never committed"
    return f"exporter {model.exporter_script} not under git"


def _conversion_rows(model: ModelRecord) -> list[tuple[str, ...]]:
    return [
        (
            c.target,
            c.platform,
            c.quantization,
            c.artifact,
            c.sha256,
            c.fingerprint or "none (not fingerprinted, or varies between conversions: see below)",
            f"{c.toolkit}, compiler {c.compiler}" if c.compiler else c.toolkit,
        )
        for c in model.conversions
    ]


def _gate_line(check: GateCheck) -> str:
    head = f"{check.gate} {check.where}" if check.where != "-" else check.gate
    if check.status == Status.PASS and check.headline is not None:
        return f"{head}: {check.headline.text()}"
    label = "" if check.status == Status.PASS else f"{check.status.value.upper()} "
    measured = f" ({check.headline.text()})" if check.headline is not None else ""
    return f"{head}: {label}{check.summary}{measured}"


def _change_rows(changes: list[ReleaseChange]) -> list[tuple[str, str, str]]:
    return [(c.subject, c.before, c.after) for c in changes]


def _audit_line(entry: AuditEntry) -> str:
    changes = f" ({'; '.join(entry.changes)})" if entry.changes else ""
    return f"{entry.date} {entry.author}, {entry.model}: {entry.reason}{changes}"


# --- rendering helpers ---


def _verdict(signoff: Signoff) -> str:
    counts = ", ".join(f"{count} {status}" for status, count in signoff.counts.items() if count)
    return f"**{'PASSED' if signoff.passed else 'FAILED'}** — {counts or 'no results'}"


def _counts(signoff: Signoff) -> str:
    return " · ".join(f"{count} {status}" for status, count in signoff.counts.items() if count)


def _markdown_table(columns: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return lines + ["| " + " | ".join(escape_cell(cell) for cell in row) + " |" for row in rows]


def _html_section(title: str, body: str) -> str:
    return f"<section><h2>{escape(title)}</h2>{body}</section>"


def _html_table(columns: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(_html_cell(cell) for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _html_cell(text: str) -> str:
    # a sha256 may break anywhere; everything else keeps its words whole
    return f'<td class="hash">{text}</td>' if SHA256.fullmatch(text) else f"<td>{escape(text)}</td>"


def _html_model(model: ModelRecord) -> str:
    table = f'<p class="note">{escape(NO_CONVERSIONS)}</p>'
    if model.conversions:
        table = _html_table(CONVERSION_COLUMNS, _conversion_rows(model))
    measured = ""
    if model.measured:
        measured = f"<p>{escape(MEASURED_NOTE)}</p>" + _html_list(list(model.measured), "")
    if model.accuracy:
        measured += f"<p>{escape(ACCURACY_NOTE)}</p>" + _html_list(list(model.accuracy), "")
    return f"<h3>{escape(model.name)}</h3><p>{escape(_model_line(model))}</p>{table}{measured}"


def _html_gates(gates: list[GateCheck]) -> str:
    parts = []
    for name in dict.fromkeys(check.model for check in gates):
        items = [(_gate_line(c), c.ticked) for c in gates if c.model == name]
        parts.append(f"<h3>{escape(name)}</h3>" + _html_checklist(items))
    return "".join(parts)


def _html_changes(changes: list[ReleaseChange] | None) -> str:
    if not changes:
        return f'<p class="note">{"no previous lock given" if changes is None else "no changes"}</p>'
    return _html_table(("what", "before", "after"), _change_rows(changes))


def _html_checklist(items: list[tuple[str, bool]]) -> str:
    rows = "".join(
        f'<li><label><input type="checkbox"{" checked" if ticked else ""}> {escape(text)}</label></li>'
        for text, ticked in items
    )
    return f'<ul class="checklist">{rows}</ul>'


def _html_list(items: list[str], empty: str) -> str:
    if not items:
        return f'<p class="note">{escape(empty)}</p>'
    return "<ul>" + "".join(f"<li>{escape(item)}</li>" for item in items) + "</ul>"
