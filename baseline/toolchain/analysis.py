"""Parsing `error_analysis.txt`, the per-layer table `rknn.accuracy_analysis()` writes.

The table is fixed-width but not reliably: wide numbers run into the next column
(`330065.250000.99995`), fused layers have no values, and fp16 overflow shows as
`q_nan` / `q_inf`. So values are tokenised by pattern, never split on whitespace.
Toolkits before 2.5 (2.2.0, 2.3.0, 2.3.2, measured) print cosines with five decimals but
euclidean distances cut to six characters (`0.0`, `0.0147`, `34411.`, `999999`), so a
number may have fewer decimals; such euclidean values are truncated, not rounded.
"""

from __future__ import annotations

import math
import re

from baseline.models.results import LayerError

ROW = re.compile(r"^\[(?P<op>[^\]]+)\]\s+(?P<name>\S+)(?P<values>.*)$")
VALUE = re.compile(r"q_nan|q_inf|-?\d+\.\d{5}|-?\d+\.\d*|\d+")


def parse_error_analysis(text: str) -> list[LayerError]:
    """One `LayerError` per layer that has values, in graph order."""
    layers = []
    for line in text.splitlines():
        match = ROW.match(line.strip())
        if match is None:
            continue
        values = [_number(token) for token in VALUE.findall(match["values"])]
        if len(values) < 4:  # a layer fused into its successor has no numbers of its own
            continue
        layers.append(
            LayerError(
                op=match["op"],
                name=match["name"],
                entire_cosine=values[0],
                entire_euclidean=values[1],
                single_cosine=values[2],
                single_euclidean=values[3],
            )
        )
    return layers


def _number(token: str) -> float:
    if token == "q_nan":
        return math.nan
    if token == "q_inf":
        return math.inf
    return float(token)


def first_divergent_layer(layers: list[LayerError], min_cosine: float) -> LayerError | None:
    """The first layer whose accumulated ("entire") cosine falls below `min_cosine` or is not finite."""
    for layer in layers:
        if not math.isfinite(layer.entire_cosine) or layer.entire_cosine < min_cosine:
            return layer
    return None
