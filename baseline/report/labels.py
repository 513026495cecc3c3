"""The HTML report's accuracy table: per model, each labelled task's metrics on every backend and
target, today's value with the locked one, a loss beyond `max_loss` marked."""

from __future__ import annotations

from html import escape

from baseline.gates.labels import LabelCheck, LabelMetrics
from baseline.models.labels import METRIC_NAMES
from baseline.models.results import Report


def labels_section(report: Report) -> str:
    """One table per model with labelled tasks; nothing when no task names labels."""
    found: dict[str, dict[str, list[LabelCheck]]] = {}
    for result in report.results:
        if isinstance(result.metrics, LabelMetrics):
            found.setdefault(result.model, {})[result.where] = result.metrics.checks
    if not found:
        return ""
    tables = [f"<h3>{escape(model)}</h3>{_table(places)}" for model, places in found.items()]
    return '<section id="labels"><h2>Accuracy against labels</h2>' + "".join(tables) + "</section>"


def _table(places: dict[str, list[LabelCheck]]) -> str:
    rows = dict.fromkeys((c.task, c.kind, c.metric) for checks in places.values() for c in checks)
    head = "".join(f"<th>{escape(where)}</th>" for where in places)
    body = []
    for task, kind, metric in rows:
        cells = []
        for checks in places.values():
            check = next((c for c in checks if (c.task, c.metric) == (task, metric)), None)
            cells.append(_cell(check))
        label = f"tasks[{task}] {kind} {METRIC_NAMES[metric]}"
        body.append(f"<tr><td>{escape(label)}</td>{''.join(cells)}</tr>")
    return f"<table><thead><tr><th>metric</th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _cell(check: LabelCheck | None) -> str:
    if check is None:
        return "<td>–</td>"
    text = f"{check.now:.3f} (locked {check.locked:.3f})"
    if check.passed:
        return f"<td>{escape(text)}</td>"
    return f'<td class="s-fail">{escape(f"{text}, loss {check.loss:+.3f} > {check.max_loss:g}")}</td>'
