"""The HTML report: one self-contained file (inline CSS and SVG, no script, no URL; fixture
photographs are inlined as `data:` images).

Given the lock as well, it draws each output's distribution, locked baseline vs candidate,
and the per-layer cosine of any consistency result that ran the accuracy analysis.
"""

from __future__ import annotations

from html import escape
from typing import Any

from baseline.files.pictures import PictureSource
from baseline.gates.consistency import ConsistencyMetrics
from baseline.gates.drift import PART_BAND, DriftMetrics, quantization_slack
from baseline.models.lock import Lock, ModelLock, ReferencePin
from baseline.models.results import GateResult, Report, Status, place_label
from baseline.models.task import is_channel_key, tolerance_key
from baseline.models.tensors import TensorStats
from baseline.models.tolerances import DriftTolerance
from baseline.report.labels import labels_section
from baseline.report.svg import StatMove, drift_plot, layer_cosine_plot, quantile_plot
from baseline.report.tasks import tasks_section

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif;
       margin: 0; color: #1f2328; background: #f6f8fa; }
main { max-width: 1200px; margin: 0 auto; padding: 8px 24px 32px; }
header.verdict { padding: 14px 24px; color: #fff; }
header.verdict h1 { margin: 0; font-size: 22px; }
header.verdict p { margin: 2px 0 0; }
.passed { background: #1a7f37; } .failed { background: #cf222e; }
h2 { margin: 24px 0 8px; font-size: 18px; border-bottom: 1px solid #d0d7de; }
h3 { margin: 16px 0 6px; font-size: 15px; }
table { border-collapse: collapse; width: 100%; background: #fff; border: 1px solid #d0d7de; }
th, td { padding: 4px 8px; text-align: left; vertical-align: top; border-bottom: 1px solid #eaeef2; }
th { background: #f6f8fa; }
td.status { font: bold 12px ui-monospace, SFMono-Regular, Menlo, monospace; white-space: nowrap; }
td.where { white-space: nowrap; }
.s-pass { color: #1a7f37; } .s-fail { color: #cf222e; } .s-error { color: #8250df; }
.s-skip { color: #6e7781; } .s-xfail { color: #9a6700; }
tr.bad { background: #fff5f5; }
tr.more td { border-bottom: 1px solid #d0d7de; }
ul.details { margin: 4px 0; padding-left: 20px; font: 12px/1.5 ui-monospace, SFMono-Regular, Menlo, monospace;
             white-space: pre-wrap; word-break: break-word; }
p.hint { margin: 4px 0; color: #0969da; }
p.note { color: #6e7781; }
.figures { display: flex; flex-wrap: wrap; gap: 12px; }
figure { margin: 0; background: #fff; border: 1px solid #d0d7de; padding: 6px; }
figcaption { font-size: 12px; color: #57606a; padding: 2px 4px; }
svg.plot { max-width: 100%; height: auto; display: block; }
table.sides td code { white-space: pre-wrap; word-break: break-word; }
code { font-size: 12px; }
td.hash { word-break: break-all; min-width: 16em;
          font: 11px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; }
ul.checklist { list-style: none; padding-left: 4px; margin: 4px 0; }
ul.checklist li { margin: 2px 0; }
figure.segmentation .panels { display: flex; gap: 6px; }
svg.masks image.mask { image-rendering: pixelated; }
ul.classes { list-style: none; margin: 4px 0 0; padding: 0; columns: 2; }
span.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 4px; opacity: 0.7; }
details.passes { margin: 8px 0; }
details.passes > summary { cursor: pointer; color: #1a7f37; font-weight: 600; padding: 4px 0; }
"""


def render_html(report: Report, lock: Lock | None = None, pictures: PictureSource | None = None) -> str:
    """The whole report as one HTML page; without `lock`, no distribution plots; with `pictures`,
    failed detections are drawn on the fixture photographs."""
    title = f"baseline verify: {_verdict(report)}"
    return page(
        title,
        verdict_header(report, title),
        [
            warnings_section(report),
            results_section(report),
            tasks_section(report, lock, pictures),
            labels_section(report),
            distributions_section(report, lock),
            layers_section(report, lock),
        ],
    )


def page(title: str, header: str, sections: list[str]) -> str:
    """A complete, self-contained HTML document."""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        f"{header}\n<main>\n" + "\n".join(sections) + "\n</main>\n</body>\n</html>\n"
    )


def verdict_header(report: Report, title: str) -> str:
    """The coloured banner: verdict, counts and the lock."""
    counts = " · ".join(f"{count} {status}" for status, count in report.counts().items() if count)
    css = "passed" if report.passed else "failed"
    return (
        f'<header class="verdict {css}"><h1>{escape(title)}</h1>'
        f"<p>{escape(counts or 'no results')}</p><p><code>{escape(report.lock)}</code></p></header>"
    )


def warnings_section(report: Report) -> str:
    """What makes the results mean less than they seem; nothing when there is nothing to say."""
    if not report.warnings:
        return ""
    items = "".join(f"<li>{escape(warning)}</li>" for warning in report.warnings)
    return f'<section id="warnings"><h2>Warnings</h2><ul class="details">{items}</ul></section>'


def results_section(report: Report) -> str:
    """Every result, what needs a look first: failures and errors (expanded with their details
    and hint), then expected failures and skips; passes collapsed in a `<details>` below."""
    groups = {
        "attention": [r for r in report.results if r.status in (Status.FAIL, Status.ERROR)],
        "expected": [r for r in report.results if r.status in (Status.XFAIL, Status.SKIP)],
        "passed": [r for r in report.results if r.status == Status.PASS],
    }
    parts = ['<section id="results"><h2>Results</h2>']
    shown = groups["attention"] + groups["expected"]
    if shown:
        parts.append(_results_table(shown))
    if groups["passed"]:
        count = len(groups["passed"])
        parts.append(
            f'<details class="passes"><summary>{count} passed</summary>'
            f"{_results_table(groups['passed'])}</details>"
        )
    if not report.results:
        parts.append('<p class="note">no results</p>')
    return "".join([*parts, "</section>"])


def _results_table(results: list[GateResult]) -> str:
    rows = "\n".join(_result_rows(result) for result in results)
    return (
        "<table>\n<thead><tr><th>status</th><th>model</th><th>gate</th>"
        f"<th>backend / target</th><th>summary</th></tr></thead>\n<tbody>\n{rows}\n</tbody></table>"
    )


def distributions_section(report: Report, lock: Lock | None) -> str:
    """Per model, backend / target and output: quantiles of the locked baseline vs the candidate."""
    heading = '<section id="distributions"><h2>Output distributions</h2>'
    if lock is None:
        return f'{heading}<p class="note">no lock given</p></section>'
    parts = [heading]
    for name in dict.fromkeys(result.model for result in report.results):
        model = lock.model(name)
        if model is None:
            continue
        figures = [
            _distribution_figure(model, reference, stats, _drift_result(report, name, reference))
            for reference in model.references
            for stats in reference.outputs
            if not is_channel_key(stats.name)  # per-channel entries carry no distribution to plot
        ]
        parts.append(f"<h3>{escape(name)}</h3>" + _figures(figures))
    return "\n".join([*parts, "</section>"])


def layers_section(report: Report, lock: Lock | None) -> str:
    """The per-layer cosine of every consistency result that ran the accuracy analysis."""
    figures = []
    for result in report.results:
        metrics = result.metrics
        if not isinstance(metrics, ConsistencyMetrics) or not metrics.layers:
            continue
        # the strictest min cosine of the outputs, as the gate's analysis used it
        threshold = min((output.min_cosine for output in metrics.outputs.values()), default=None)
        layers = [layer.model_dump() for layer in metrics.layers]
        caption = f"{result.model} · {result.where} · {result.status.value.upper()}"
        figures.append(_figure(layer_cosine_plot(layers, threshold), caption))
    if not figures:
        return ""
    return '<section id="layers"><h2>Per-layer cosine</h2>' + _figures(figures) + "</section>"


def _verdict(report: Report) -> str:
    return "PASSED" if report.passed else "FAILED"


def _result_rows(result: GateResult) -> str:
    failing = result.status in (Status.FAIL, Status.ERROR)
    status = result.status.value
    row = (
        f'<tr class="{"bad" if failing else status}"><td class="status s-{status}">{status.upper()}</td>'
        f"<td>{escape(result.model)}</td><td>{escape(result.gate)}</td>"
        f'<td class="where">{escape(result.where)}</td>'
        f"<td>{escape(result.summary)}</td></tr>"
    )
    if not (result.details or (failing and result.hint)):
        return row
    items = "".join(f"<li>{escape(detail)}</li>" for detail in result.details)
    hint = f'<p class="hint">hint: {escape(result.hint)}</p>' if result.hint else ""
    summary = f"{len(result.details)} detail line{'s' if len(result.details) != 1 else ''}"
    more = (
        f"<details{' open' if failing else ''}><summary>{summary}</summary>"
        f'<ul class="details">{items}</ul>{hint}</details>'
    )
    return f'{row}\n<tr class="more"><td></td><td colspan="4">{more}</td></tr>'


def _drift_result(report: Report, model: str, reference: ReferencePin) -> GateResult | None:
    return next(
        (
            r
            for r in report.results
            if r.model == model
            and r.gate == "drift"
            and r.backend == reference.backend
            and r.target == reference.target
        ),
        None,
    )


def _distribution_figure(
    model: ModelLock, reference: ReferencePin, stats: TensorStats, drift: GateResult | None
) -> str:
    """The quantiles, locked vs now; where a statistic moved beyond what it may, also what moved
    (the curves of a 202× drift can look the same: the bars say which statistic broke)."""
    label = place_label(reference.backend, reference.target)
    metrics = drift.metrics if drift is not None else None
    entry = metrics.outputs.get(stats.name) if isinstance(metrics, DriftMetrics) else None
    candidate = entry.candidate if entry is not None else None
    plot = quantile_plot(
        stats.quantiles, candidate.quantiles if candidate else None, f"{stats.name} · {label}"
    )
    if drift is None:
        caption = "no drift result for this backend / target: baseline only"
    elif entry is None:
        caption = f"drift {drift.status.value.upper()}: {drift.summary}"
    else:
        caption = f"drift {drift.status.value.upper()}, worst {_ratio(entry.worst_ratio)} allowed"
    if entry is not None and candidate is not None and not entry.worst_ratio <= 1.0:
        requantized = isinstance(metrics, DriftMetrics) and metrics.requantized
        moves = _moves(model, reference, stats, candidate, requantized)
        plot += drift_plot(moves, f"{stats.name} · {label} · what moved")
        broke = [m for m in moves if m.beyond]
        caption += (
            "; beyond allowed: " + ", ".join(f"{m.statistic} {_signed(m.ratio)}" for m in broke)
            if broke
            else ""
        )
    non_finite = _non_finite("baseline", stats.nan, stats.inf)
    if candidate is not None:
        non_finite += _non_finite("candidate", candidate.nan, candidate.inf)
    return _figure(plot, "; ".join([caption, *non_finite]))


def _moves(
    model: ModelLock, reference: ReferencePin, locked: TensorStats, now: TensorStats, requantized: bool
) -> list[StatMove]:
    """Each statistic the drift gate compares, with the band it allowed."""
    from baseline.compare import stat_deltas  # numpy: only when a drift is drawn

    tolerance = drift_tolerance(model, reference, locked.name)
    slack = quantization_slack(model, reference, locked, requantized)
    return [
        StatMove(d.statistic, d.baseline, d.candidate, d.allowed)
        for d in stat_deltas(locked, now, tolerance, slack)
    ]


def drift_tolerance(model: ModelLock, reference: ReferencePin, name: str) -> DriftTolerance:
    """The drift gate's tolerance for an output, part or channel: a part's and its channels' `atol`
    widened by `PART_BAND` of the part's locked range, as the gate does."""
    tolerance = model.tolerance(name).drift
    part = tolerance_key(name)
    if part not in {p.key for p in model.parts}:
        return tolerance
    stats = next((s for s in reference.outputs if s.name == part), None)
    span = (
        stats.max - stats.min if stats is not None and stats.max is not None and stats.min is not None else 0
    )
    return tolerance.model_copy(update={"atol": tolerance.atol + PART_BAND * span}) if span else tolerance


def _signed(ratio: float | None) -> str:
    return "(appeared or vanished)" if ratio is None else f"{ratio:+.3g}×"


def _non_finite(which: str, nan: int, inf: int) -> list[str]:
    return [f"{which}: {nan} NaN, {inf} Inf"] if nan or inf else []


def _ratio(value: Any) -> str:
    return "n/a" if value is None else f"{float(value):.3g}×"


def _figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>"


def _figures(figures: list[str]) -> str:
    return '<div class="figures">\n' + "\n".join(figures) + "\n</div>"
