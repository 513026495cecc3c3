"""Sign-off: what a release pins, what the gates measured, what changed, what is left to do by hand.

`build_signoff` gathers the numbers from a lock, the `Report` of verifying it and, optionally,
the lock it replaces; `render_signoff_markdown` and `render_signoff_html` only render them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from baseline.backends import BOARD_BACKENDS
from baseline.models.lock import (
    AuditEntry,
    ConversionPin,
    HostToolchain,
    Lock,
    ModelLock,
    ObservedBoard,
    ReferencePin,
    ToolkitPin,
)
from baseline.models.results import GateResult, Report, Status
from baseline.models.tensors import TensorStats
from baseline.models.tolerances import DriftTolerance, GateTolerances
from baseline.report.html import distributions_section, layers_section, page
from baseline.report.markdown import escape_cell, escape_text, where

"""Backends that run on a physical board; a pass from one ticks off the board check."""
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
class Measurement:
    """A gate's deciding number against its limit: `value relation threshold` must hold."""

    quantity: str
    value: float | None
    """None when the measurement is not a number (a NaN cosine)."""
    threshold: float
    relation: str
    """`≥` or `≤`."""
    precision: str = ".6g"

    @property
    def met(self) -> bool:
        if self.value is None:
            return False
        return self.value >= self.threshold if self.relation == "≥" else self.value <= self.threshold

    def text(self) -> str:
        value = "nan" if self.value is None else f"{self.value:{self.precision}}"
        limit = f"{self.relation} {self.threshold:g}"
        return f"{self.quantity} {value} {limit}" if self.met else f"{self.quantity} {value}, needs {limit}"


@dataclass(frozen=True)
class GateCheck:
    """One gate result as the sign-off lists it."""

    model: str
    gate: str
    where: str
    status: Status
    summary: str
    measurement: Measurement | None

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
    changes = list(lock_changes(previous, lock)) if previous is not None else None
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


def lock_changes(previous: Lock, lock: Lock) -> Iterator[Change]:
    """What differs between two locks: versions, models, artifacts and output statistics."""
    yield from _host_changes(previous.toolchain, lock.toolchain)
    yield from _toolkit_changes(previous.toolkits, lock.toolkits)
    before = {model.name: model for model in previous.models}
    after = {model.name: model for model in lock.models}
    for name in sorted(before.keys() - after.keys()):
        yield Change("model", f"model {name}", "present", "removed")
    for name in sorted(after.keys() - before.keys()):
        yield Change("model", f"model {name}", "absent", "added")
    for name in [n for n in after if n in before]:
        yield from _model_changes(before[name], after[name])


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
    if check.status == Status.PASS and check.measurement is not None:
        return f"{head}: {check.measurement.text()}"
    label = "" if check.status == Status.PASS else f"{check.status.value.upper()} "
    measured = f" ({check.measurement.text()})" if check.measurement is not None else ""
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
        measurement=_measurement(lock.model(result.model), result),
    )


def _measurement(model: ModelLock | None, result: GateResult) -> Measurement | None:
    """The number that decided the gate, against its limit, where the gate has one."""
    if result.gate == "consistency" and model is not None:
        return _worst_cosine(model, result)
    if result.gate == "drift":
        ratios = {k: v["worst_ratio"] for k, v in result.metrics.items() if _has(v, "worst_ratio")}
        if ratios:
            output = max(ratios, key=lambda name: ratios[name])
            return Measurement(f"worst drift / allowed ({output})", _number(ratios[output]), 1.0, "≤")
    counted = {
        "integrity": ("changed", "changed files"),
        "static": ("errors", "errors"),
        "compat": ("failures", "rule failures"),
    }
    if result.gate in counted:
        key, quantity = counted[result.gate]
        if isinstance(result.metrics.get(key), int):
            return Measurement(quantity, float(result.metrics[key]), 0.0, "≤")
    return None


def _worst_cosine(model: ModelLock, result: GateResult) -> Measurement | None:
    """The output with the least margin above its tolerance's min cosine (a NaN cosine is worst)."""
    quantized = any(t.name == result.target and t.quantized for t in model.targets)
    candidates = []
    for output, entry in result.metrics.items():
        if not _has(entry, "cosine"):
            continue
        limit = model.tolerances.get(output, GateTolerances()).for_build(quantized).min_cosine
        cosine = _number(entry["cosine"])
        margin = -math.inf if cosine is None else cosine - limit
        candidates.append((margin, Measurement(f"min cosine ({output})", cosine, limit, "≥", ".6f")))
    return min(candidates, key=lambda pair: pair[0])[1] if candidates else None


def _has(entry: Any, key: str) -> bool:
    return isinstance(entry, dict) and key in entry


def _number(value: Any) -> float | None:
    if value is None or not math.isfinite(float(value)):
        return None
    return float(value)


def _host_changes(before: HostToolchain, after: HostToolchain) -> Iterator[Change]:
    old, new = before.model_dump(), after.model_dump()
    for field, value in new.items():
        if old.get(field) != value:
            yield Change("version", f"host {field}", str(old.get(field)), str(value))


def _toolkit_changes(before: list[ToolkitPin], after: list[ToolkitPin]) -> Iterator[Change]:
    old = {pin.version: pin for pin in before}
    new = {pin.version: pin for pin in after}
    for version in sorted(old.keys() - new.keys()):
        yield Change("version", f"RKNN-Toolkit2 {version}", "pinned", "removed")
    for version in sorted(new.keys() - old.keys()):
        yield Change("version", f"RKNN-Toolkit2 {version}", "absent", "added")
    for version in [v for v in new if v in old]:
        then = {"commit": old[version].commit, "python": old[version].python, **old[version].packages}
        now = {"commit": new[version].commit, "python": new[version].python, **new[version].packages}
        for key in dict.fromkeys([*then, *now]):
            if then.get(key) != now.get(key):
                yield Change(
                    "version", f"RKNN-Toolkit2 {version} {key}", _text(then.get(key)), _text(now.get(key))
                )


def _model_changes(before: ModelLock, after: ModelLock) -> Iterator[Change]:
    name = after.name
    if before.onnx.sha256 != after.onnx.sha256:
        yield Change("model", f"{name} ONNX sha256", _short(before.onnx.sha256), _short(after.onnx.sha256))
    if before.onnx.opsets != after.onnx.opsets:
        yield Change("model", f"{name} opsets", str(before.onnx.opsets), str(after.onnx.opsets))
    if before.toolkit.version != after.toolkit.version:
        yield Change("version", f"{name} toolkit", before.toolkit.version, after.toolkit.version)
    yield from _conversion_changes(name, before.conversions, after.conversions)
    old_refs = {(ref.backend, ref.target): ref for ref in before.references}
    for ref in after.references:
        previous = old_refs.get((ref.backend, ref.target))
        if previous is not None:
            yield from _statistics_changes(after, previous, ref)


def _conversion_changes(
    name: str, before: list[ConversionPin], after: list[ConversionPin]
) -> Iterator[Change]:
    old = {pin.target: pin for pin in before}
    new = {pin.target: pin for pin in after}
    for target in sorted(old.keys() - new.keys()):
        yield Change("artifact", f"{name} {target} .rknn", _short(old[target].artifact.sha256), "removed")
    for target in [t for t in new if t not in old]:
        yield Change("artifact", f"{name} {target} .rknn", "absent", _short(new[target].artifact.sha256))
    for target in [t for t in new if t in old]:
        was, now = old[target], new[target]
        if was.artifact.sha256 != now.artifact.sha256:
            yield Change(
                "artifact",
                f"{name} {target} .rknn sha256",
                _short(was.artifact.sha256),
                _short(now.artifact.sha256),
            )
        if was.metadata.fingerprint != now.metadata.fingerprint:
            yield Change(
                "artifact",
                f"{name} {target} fingerprint",
                _short(was.metadata.fingerprint),
                _short(now.metadata.fingerprint),
            )


def _statistics_changes(model: ModelLock, before: ReferencePin, after: ReferencePin) -> Iterator[Change]:
    """Means and stds that moved by more than the output's drift tolerance (smaller is float noise)."""
    label = "/".join(part for part in (after.backend, after.target) if part)
    old = {stats.name: stats for stats in before.outputs}
    for stats in after.outputs:
        subject = f"{model.name} {label} {stats.name!r}"
        previous = old.get(stats.name)
        if previous is None:
            yield Change("statistics", f"{subject} output", "absent", "added")
            continue
        tolerance = model.tolerances.get(stats.name, GateTolerances()).drift
        for field in ("mean", "std"):
            was, now = getattr(previous, field), getattr(stats, field)
            if _moved(was, now, tolerance):
                yield Change("statistics", f"{subject} {field}", _stat(was), _stat_change(was, now))
        yield from _non_finite_change(subject, previous, stats)


def _moved(before: float | None, after: float | None, tolerance: DriftTolerance) -> bool:
    if before is None or after is None:
        return before != after
    return abs(after - before) > tolerance.atol + tolerance.rtol * abs(before)


def _non_finite_change(subject: str, before: TensorStats, after: TensorStats) -> Iterator[Change]:
    if (before.nan, before.inf) != (after.nan, after.inf):
        yield Change(
            "statistics",
            f"{subject} NaN / Inf",
            f"{before.nan} / {before.inf}",
            f"{after.nan} / {after.inf}",
        )


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
        (r.model, r.target) for r in report.results if r.backend in BOARD_BACKENDS and r.status == Status.PASS
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
