"""Sign-off: what a release pins, what the gates measured, what changed, what is left to do by hand.

`build_signoff` gathers the numbers from a lock, the `Report` of verifying it and, optionally,
the lock it replaces; `render_signoff_markdown` and `render_signoff_html` only render them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from baseline import diff
from baseline.backends import capabilities
from baseline.models.lock import (
    AuditEntry,
    ConversionPin,
    HostToolchain,
    Lock,
    ModelLock,
    ObservedBoard,
    ToolkitPin,
)
from baseline.models.results import GateResult, Headline, Report, Status
from baseline.models.tolerances import DriftTolerance
from baseline.report.html import distributions_section, layers_section, page
from baseline.report.markdown import escape_cell, escape_text, where

NOT_PINNED = "—"
SHA256 = re.compile("[0-9a-f]{64}")
NO_CONVERSIONS = "no .rknn pinned: the model did not compile for any target when it was locked"


@dataclass(frozen=True)
class ConversionRecord:
    """One pinned `.rknn` build."""

    target: str
    platform: str
    quantization: str
    """`fp16`, or `dtype / algorithm / method`."""
    artifact: str
    sha256: str
    fingerprint: str | None
    toolkit: str
    compiler: str | None


@dataclass(frozen=True)
class ModelRecord:
    """What is pinned for one model: the ONNX source, its provenance and its builds."""

    name: str
    onnx: str
    onnx_sha256: str
    opsets: dict[str, int]
    toolkit: str
    exporter_commit: str | None
    exporter_dirty: bool | None
    conversions: list[ConversionRecord]


@dataclass(frozen=True)
class GateCheck:
    """One gate result as the sign-off lists it."""

    model: str
    gate: str
    where: str
    status: Status
    summary: str
    headline: Headline | None

    @property
    def ticked(self) -> bool:
        """Passed, or failed as the intent file said it would; a skip is left for a person."""
        return self.status in (Status.PASS, Status.XFAIL)


@dataclass(frozen=True)
class Change:
    """One difference from the previous lock."""

    kind: str
    """`version`, `model`, `artifact` or `statistics`."""
    subject: str
    before: str
    after: str


@dataclass(frozen=True)
class Signoff:
    """Everything a person needs to sign off a lock, computed; rendering is separate."""

    lock: str
    passed: bool
    counts: dict[str, int]
    host: HostToolchain
    toolkits: list[ToolkitPin]
    boards: list[ObservedBoard]
    models: list[ModelRecord]
    gates: list[GateCheck]
    changes: list[Change] | None
    """None when there was no previous lock to compare with."""
    audit: list[AuditEntry]
    manual: list[str]
    """Checks no gate can make, to tick by hand."""


def build_signoff(lock: Lock, report: Report, previous: Lock | None) -> Signoff:
    """The sign-off of `lock`, verified as `report`, against the lock it replaces (if any)."""
    changes = lock_changes(previous, lock) if previous is not None else None
    return Signoff(
        lock=report.lock,
        passed=report.passed,
        counts=report.counts(),
        host=lock.toolchain,
        toolkits=lock.toolkits,
        boards=lock.boards,
        models=[_model_record(model) for model in lock.models],
        gates=[_gate_check(lock, result) for result in report.results],
        changes=changes,
        audit=lock.audit,
        manual=_manual_items(lock, report, bool(changes)),
    )


def lock_changes(previous: Lock, lock: Lock) -> list[Change]:
    """What differs between two locks, as a reviewer reads it: `baseline diff`'s changes, named
    for people, with output statistics kept only where they moved beyond the drift tolerance."""
    described = [_describe(change, lock) for change in diff.diff_locks(previous, lock)]
    return list(dict.fromkeys(change for change in described if change is not None))


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


def render_signoff_html(signoff: Signoff, report: Report, lock: Lock) -> str:
    """The sign-off as one self-contained HTML page, with the report's distribution plots."""
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
    exporter = "exporter not under git"
    if model.exporter_commit:
        state = "uncommitted changes" if model.exporter_dirty else "clean"
        exporter = f"exporter commit {model.exporter_commit[:12]} ({state})"
    return (
        f"ONNX {model.onnx}, sha256 {model.onnx_sha256}, opset {opsets}; toolkit {model.toolkit}; {exporter}"
    )


def _conversion_rows(model: ModelRecord) -> list[tuple[str, ...]]:
    return [
        (
            c.target,
            c.platform,
            c.quantization,
            c.artifact,
            c.sha256,
            c.fingerprint or "none (format not fingerprinted)",
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


def _change_rows(changes: list[Change]) -> list[tuple[str, str, str]]:
    return [(c.subject, c.before, c.after) for c in changes]


def _audit_line(entry: AuditEntry) -> str:
    changes = f" ({'; '.join(entry.changes)})" if entry.changes else ""
    return f"{entry.date} {entry.author}, {entry.model}: {entry.reason}{changes}"


# --- computing ---


def _model_record(model: ModelLock) -> ModelRecord:
    return ModelRecord(
        name=model.name,
        onnx=model.onnx.path,
        onnx_sha256=model.onnx.sha256,
        opsets=model.onnx.opsets,
        toolkit=model.toolkit.version,
        exporter_commit=model.exporter.commit,
        exporter_dirty=model.exporter.dirty,
        conversions=[_conversion_record(pin) for pin in model.conversions],
    )


def _conversion_record(pin: ConversionPin) -> ConversionRecord:
    return ConversionRecord(
        target=pin.target,
        platform=pin.platform,
        quantization=_quantization(pin),
        artifact=pin.artifact.path,
        sha256=pin.artifact.sha256,
        fingerprint=pin.metadata.fingerprint,
        toolkit=pin.metadata.toolkit_version,
        compiler=pin.metadata.compiler_version,
    )


def _quantization(pin: ConversionPin) -> str:
    q = pin.quantization
    return "fp16" if q is None else f"{q.dtype} / {q.algorithm} / {q.method}"


def _gate_check(lock: Lock, result: GateResult) -> GateCheck:
    return GateCheck(
        model=result.model,
        gate=result.gate,
        where=where(result),
        status=result.status,
        summary=result.summary,
        headline=result.metrics.headline() if result.metrics is not None else None,
    )


def _describe(change: diff.Change, lock: Lock) -> Change | None:
    """One `baseline diff` change in sign-off words; None for noise (float jitter, minor stats)."""
    if change.scope == "lock":
        return _describe_lock(change)
    part = change.path[0]
    if part == "model":
        return Change(
            "model",
            f"model {change.scope}",
            *(("present", "removed") if change.new is None else ("absent", "added")),
        )
    if part == "outputs":
        return _describe_statistics(change, lock.model(change.scope))
    if part == "conversions":
        return _describe_conversion(change)
    if change.path == ("toolkit", "version"):
        return Change("version", f"{change.scope} toolkit", _text(change.old), _text(change.new))
    subject = {"onnx": "ONNX", "fixtures": "fixtures", "toolkit": "toolkit", "tolerances": "tolerance"}[part]
    return Change(
        "model", " ".join([change.scope, subject, *change.path[1:]]), _value(change.old), _value(change.new)
    )


def _describe_lock(change: diff.Change) -> Change:
    if change.path[0] == "toolchain":
        return Change("version", f"host {change.path[1]}", str(change.old), str(change.new))
    version, detail = change.path[1], change.path[2:]
    subject = " ".join(["RKNN-Toolkit2", version, *(part for part in detail if part != "packages")])
    if not detail:
        return Change(
            "version", subject, *(("pinned", "removed") if change.new is None else ("absent", "added"))
        )
    return Change("version", subject, _text(change.old), _text(change.new))


def _describe_conversion(change: diff.Change) -> Change:
    target, detail = change.path[1], change.path[2:]
    subject = f"{change.scope} {target} .rknn"
    if not detail:  # a target added or removed
        return Change(
            "artifact", subject, _pin_digest(change.old, "absent"), _pin_digest(change.new, "removed")
        )
    if detail == ("fingerprint",):
        subject = f"{change.scope} {target} fingerprint"
    else:
        subject = " ".join([subject, *detail])
    return Change("artifact", subject, _value(change.old), _value(change.new))


def _pin_digest(pin: object, missing: str) -> str:
    return _short(str(pin["sha256"])) if isinstance(pin, dict) else missing


def _describe_statistics(change: diff.Change, model: ModelLock | None) -> Change | None:
    """Means and stds that moved by more than the output's drift tolerance (smaller is float
    noise), NaN / Inf counts, outputs that appeared; other statistics are in `baseline diff`."""
    if model is None or len(change.path) < 3:
        return None  # a whole backend's outputs added or removed: the conversion change says it
    output = change.path[2]
    subject = f"{model.name} {change.path[1]} {output!r}"
    if len(change.path) == 3:
        return Change("statistics", f"{subject} output", "absent", "added") if change.old is None else None
    statistic = change.path[3]
    if statistic in ("nan", "inf"):
        return Change(
            "statistics",
            f"{subject} {statistic.replace('nan', 'NaN').replace('inf', 'Inf')}",
            str(change.old),
            str(change.new),
        )
    tolerance = model.tolerance(output).drift
    if statistic in ("mean", "std") and _moved(change.old, change.new, tolerance):
        return Change(
            "statistics", f"{subject} {statistic}", _stat(change.old), _stat_change(change.old, change.new)
        )
    return None


def _moved(before: float | None, after: float | None, tolerance: DriftTolerance) -> bool:
    if before is None or after is None:
        return before is not after
    return bool(abs(after - before) > tolerance.atol + tolerance.rtol * abs(before))


def _stat(value: float | None) -> str:
    return "none" if value is None else f"{value:.6g}"


def _stat_change(before: float | None, after: float | None) -> str:
    if before is None or after is None or before == 0:
        return _stat(after)
    return f"{after:.6g} ({(after - before) / abs(before):+.2%})"


def _short(digest: str | None) -> str:
    return "none" if digest is None else f"{digest[:12]}…"


def _text(value: str | None) -> str:
    return NOT_PINNED if value is None else value


def _value(value: object) -> str:
    """A changed value in a table cell: digests shortened, absent values named."""
    if value is None:
        return "none"
    if isinstance(value, str) and len(value) == 64:
        return _short(value)
    return str(value)


def _manual_items(lock: Lock, report: Report, changed: bool) -> list[str]:
    items = _board_items(lock, report)
    for model in lock.models:
        fixtures = model.fixtures
        source = f"{fixtures.samples} random sample(s), seed {fixtures.seed}"
        if fixtures.source is not None:
            source = f"{fixtures.samples} sample(s) from {fixtures.source.path}"
        items.append(f"{model.name}: accuracy on the real validation set (the gates used {source})")
        if model.exporter.dirty:
            items.append(f"{model.name}: commit the export script (it had uncommitted changes when locked)")
    expected = [f"{r.model} {r.gate} {where(r)}" for r in report.results if r.status == Status.XFAIL]
    if expected:
        items.append(f"the expected failures are still acceptable: {', '.join(expected)}")
    if changed:
        items.append("every change since the previous lock is intended")
    items.append("sign-off by the model owner: name, date")
    items.append("sign-off by whoever ships the board image: name, date")
    return items


def _board_items(lock: Lock, report: Report) -> list[str]:
    """One item per platform with a pinned `.rknn` that no board backend passed on in this report."""
    on_board = {
        (r.model, r.target)
        for r in report.results
        if r.backend is not None and capabilities(r.backend).needs_board and r.status == Status.PASS
    }
    platforms: dict[str, list[str]] = {}
    for model in lock.models:
        for pin in model.conversions:
            if (model.name, pin.target) not in on_board:
                names = platforms.setdefault(pin.platform, [])
                names += [] if model.name in names else [model.name]
    return [
        f"run {', '.join(names)} on a physical {platform} board (the gates above ran on the simulator)"
        for platform, names in platforms.items()
    ]


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
    return f"<h3>{escape(model.name)}</h3><p>{escape(_model_line(model))}</p>{table}"


def _html_gates(gates: list[GateCheck]) -> str:
    parts = []
    for name in dict.fromkeys(check.model for check in gates):
        items = [(_gate_line(c), c.ticked) for c in gates if c.model == name]
        parts.append(f"<h3>{escape(name)}</h3>" + _html_checklist(items))
    return "".join(parts)


def _html_changes(changes: list[Change] | None) -> str:
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
