"""The SVG builders: well-formed, both series drawn, NaN / Inf shown rather than hidden."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

from baseline.report.svg import BAD_COLOUR, layer_cosine_plot, quantile_plot

QUANTILES = [i / 20 for i in range(21)]
OVERFLOW_LAYERS = [
    {"op": "Input", "name": "image", "entire_cosine": 1.0, "single_cosine": 1.0},
    {"op": "Conv", "name": "scaled", "entire_cosine": math.nan, "single_cosine": math.nan},
    {"op": "Relu", "name": "scaled.relu", "entire_cosine": math.nan, "single_cosine": math.inf},
    {"op": "Mul", "name": "activations", "entire_cosine": math.nan, "single_cosine": math.nan},
]


def _series(svg: str) -> list[str]:
    return [line.get("data-series", "") for line in ET.fromstring(svg).iter("polyline")]


def _texts(svg: str) -> list[str]:
    return [text.text or "" for text in ET.fromstring(svg).iter("text")]


def test_quantile_plot_draws_baseline_and_candidate_with_labels() -> None:
    svg = quantile_plot(QUANTILES, [q + 0.1 for q in QUANTILES], "logits · rknn-sim/rk3588")
    assert _series(svg) == ["baseline (lock)", "candidate"]
    texts = _texts(svg)
    assert {"logits · rknn-sim/rk3588", "quantile (%)", "value", "baseline (lock)", "candidate"} <= set(texts)
    assert {"0", "50", "100"} <= set(texts)
    points = ET.fromstring(svg).find("polyline").get("points", "").split()  # type: ignore[union-attr]
    assert len(points) == 21


def test_quantile_plot_without_candidate_draws_the_baseline_only() -> None:
    assert _series(quantile_plot(QUANTILES, None, "t")) == ["baseline (lock)"]


def test_text_is_escaped() -> None:
    svg = quantile_plot(QUANTILES, None, 'out<put> & "x"')
    assert 'out<put> & "x"' in _texts(svg)
    assert "<put>" not in svg


def test_a_nan_breaks_the_line_and_no_finite_value_is_said() -> None:
    assert _series(quantile_plot([0.0, 1.0, math.nan, 3.0, 4.0], None, "t")) == ["baseline (lock)"] * 2
    empty = quantile_plot([], [], "all NaN")
    assert "no finite values to plot" in _texts(empty) and _series(empty) == []


def test_a_constant_output_still_gets_an_axis() -> None:
    svg = quantile_plot([2.0] * 21, [2.0] * 21, "constant")
    assert len(_series(svg)) == 2 and "nan" not in svg


def test_layer_plot_marks_every_non_finite_cosine_in_red_at_the_bottom() -> None:
    svg = layer_cosine_plot(OVERFLOW_LAYERS, threshold=0.9999)
    root = ET.fromstring(svg)
    marks = [p for p in root.iter("path") if p.get("class") == "non-finite"]
    assert len(marks) == 6 and all(p.get("stroke") == BAD_COLOUR for p in marks)
    floor = max(float(line.get("y1", 0)) for line in root.iter("line"))
    assert all(float(p.get("d", "M0,0").split(",")[1].split()[0]) > floor - 16 for p in marks)
    assert "[Conv] scaled: accumulated cosine nan" in [t.text for t in root.iter("title")]
    assert {"image", "scaled", "activations", "NaN / Inf", "min cosine 0.9999"} <= set(_texts(svg))
    threshold = [line for line in root.iter("line") if line.get("stroke-dasharray") == "2 3"]
    assert len(threshold) == 2  # the line and its legend entry


def test_layer_plot_reads_json_nulls_and_skips_the_threshold_when_none() -> None:
    layers = [{"op": "Conv", "name": "c", "entire_cosine": None, "single_cosine": 0.99}]
    svg = layer_cosine_plot(layers)
    assert "min cosine" not in svg and len(_series(svg)) == 1
    assert "no layers analysed" in _texts(layer_cosine_plot([]))


def test_many_layers_get_index_ticks() -> None:
    layers = [
        {"op": "Conv", "name": f"conv_{i}", "entire_cosine": 1 - i * 1e-4, "single_cosine": 1.0}
        for i in range(200)
    ]
    texts = _texts(layer_cosine_plot(layers, 0.99))
    assert "conv_7" not in texts and "0" in texts and "180" in texts
