"""The HTML report: one self-contained page, a plot per output, failures expanded."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from baseline.gates.consistency import ConsistencyMetrics
from baseline.gates.drift import DriftMetrics
from baseline.models.lock import Lock
from baseline.models.results import GateResult, Report, Status
from baseline.report.html import render_html
from tests.report.conftest import SVG_ELEMENT, assert_well_formed


def _plots(document: str) -> dict[str, list[str]]:
    """Each inline SVG by its title: the series its polylines draw."""
    plots = {}
    for svg in SVG_ELEMENT.findall(document):
        root = ET.fromstring(svg)
        plots[root.get("aria-label", "")] = [p.get("data-series", "") for p in root.iter("polyline")]
    return plots


@pytest.mark.toolkit
def test_demo_report_is_self_contained_with_a_plot_per_output(verified: tuple[Report, Lock]) -> None:
    report, lock = verified
    document = render_html(report, lock)
    assert_well_formed(document)
    plots = _plots(document)
    for model in lock.models:
        for reference in model.references:
            where = "/".join(part for part in (reference.backend, reference.target) if part)
            for stats in reference.outputs:
                series = plots[f"{stats.name} · {where}"]
                if stats.quantiles:
                    assert set(series) == {"baseline (lock)", "candidate"}, (model.name, where, stats.name)
    layer_plots = [
        r for r in report.results if isinstance(r.metrics, ConsistencyMetrics) and r.metrics.layers
    ]
    assert len(layer_plots) == 1  # overflow's fp16 build
    assert "cosine per layer vs float (accuracy_analysis)" in plots
    assert len(SVG_ELEMENT.findall(document)) == sum(
        len(ref.outputs) for model in lock.models for ref in model.references
    ) + len(layer_plots)


@pytest.mark.toolkit
def test_header_table_and_expanded_failures(retrained: tuple[Report, Lock]) -> None:
    report, lock = retrained
    document = render_html(report, lock)
    assert_well_formed(document)
    assert '<header class="verdict failed"><h1>baseline verify: FAILED</h1>' in document
    failing = [r for r in report.results if r.status in (Status.FAIL, Status.ERROR)]
    assert document.count("<details open>") == len(failing)
    assert document.count('<td class="status') == len(report.results)
    assert "hint: the model changed since the lock" in document  # accept or revert, never a tolerance
    assert "if the change is intended, else revert it" in document
    drift = _plots(document)["logits · rknn-sim/rk3588"]
    assert drift == ["baseline (lock)", "candidate"]


def test_user_text_is_escaped_and_no_lock_means_no_distributions(handmade: Report) -> None:
    document = render_html(handmade)
    assert_well_formed(document)
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in document
    assert "no lock given" in document
    assert list(_plots(document)) == ["cosine per layer vs float (accuracy_analysis)"]


def test_candidate_quantiles_come_from_the_drift_result_of_the_same_target(
    handmade: Report, demo_lock: Lock
) -> None:
    plots = _plots(render_html(handmade, demo_lock))
    assert plots["logits · rknn-sim/rk3588"] == ["baseline (lock)", "candidate"]
    assert plots["logits · rknn-sim/rk3588-w8a8"] == ["baseline (lock)"]  # no drift result for it
    assert plots["logits · onnxruntime"] == ["baseline (lock)"]


def _status_cells(fragment: str) -> list[str]:
    return re.findall(r'<td class="status s-(\w+)">', fragment)


def test_failures_come_first_and_passes_are_collapsed(handmade: Report) -> None:
    passes = [
        GateResult(model=f"m{i}", gate="integrity", status=Status.PASS, summary="files match <ok>")
        for i in range(36)
    ]
    report = handmade.model_copy(update={"results": passes[:18] + handmade.results + passes[18:]})
    document = render_html(report)
    assert_well_formed(document)
    section = document[document.index('<section id="results">') : document.index("</section>")]
    shown, collapsed = section.split('<details class="passes">')
    # what needs a look on top, in report order within each group: fail / error, then xfail / skip
    assert _status_cells(shown) == ["fail", "error", "skip", "xfail"]
    assert collapsed.startswith("<summary>37 passed</summary>")
    assert _status_cells(collapsed) == ["pass"] * 37
    assert "files match &lt;ok&gt;" in collapsed and "<ok>" not in collapsed
    assert "<details open><summary>2 detail lines</summary>" in shown  # the failure's details, open


def test_an_all_green_report_is_one_collapsed_line(handmade: Report) -> None:
    passed = [r for r in handmade.results if r.status == Status.PASS]
    document = render_html(handmade.model_copy(update={"results": passed}))
    section = document[document.index('<section id="results">') : document.index("</section>")]
    assert section.count("<table>") == 1
    assert '<details class="passes"><summary>1 passed</summary><table>' in section


def test_a_drift_beyond_allowed_shows_which_statistic_moved_and_by_how_much(
    handmade: Report, demo_lock: Lock
) -> None:
    classifier = demo_lock.model("classifier")
    assert classifier is not None
    reference = classifier.reference("rknn-sim", "rk3588")
    assert reference is not None
    logits = next(stats for stats in reference.outputs if stats.name == "logits")
    assert logits.max is not None
    allowed = classifier.tolerance("logits").drift
    band = allowed.atol + allowed.rtol * abs(logits.max)
    moved = logits.model_copy(update={"max": logits.max + 202 * band})  # the curves barely change
    drift = next(r for r in handmade.results if r.gate == "drift")
    metrics = {"outputs": {"logits": {"worst_ratio": 202.0, "candidate": moved.model_dump()}}}
    results = [drift.model_copy(update={"metrics": DriftMetrics.model_validate(metrics)})]
    document = render_html(handmade.model_copy(update={"results": results}), demo_lock)
    assert_well_formed(document)
    svg = next(s for s in SVG_ELEMENT.findall(document) if "what moved" in s)
    root = ET.fromstring(svg)
    assert root.get("aria-label") == "logits · rknn-sim/rk3588 · what moved"
    bars = {bar.get("data-statistic"): bar for bar in root.iter("rect") if bar.get("data-statistic")}
    assert list(bars) == ["min", "max", "mean", "std", "p01", "p50", "p99"]
    assert bars["max"].get("class") == "moved beyond" and float(bars["max"].get("data-ratio", 0)) == (
        pytest.approx(202.0)
    )
    assert all(bars[name].get("class") == "moved" for name in bars if name != "max")
    allowed_band = next(bar for bar in root.iter("rect") if bar.get("class") == "allowed")
    assert float(bars["max"].get("width", 0)) > 3 * float(allowed_band.get("width", 0)) / 2
    assert "drift FAIL, worst 202× allowed; beyond allowed: max +202×" in document
    # only outputs beyond their tolerance get the bars: one plot of what moved
    assert sum("what moved" in plot for plot in SVG_ELEMENT.findall(document)) == 1
