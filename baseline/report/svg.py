"""Small SVG plots for the HTML reports: plain strings, no plotting library, no script.

The SVG is meant to be inlined in an HTML5 page, which puts `<svg>` in the SVG namespace by
itself; so there is no `xmlns` (and no URL of any kind) in the output.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape, quoteattr

BASELINE_COLOUR = "#0072b2"
CANDIDATE_COLOUR = "#e69f00"
SINGLE_COLOUR = "#009e73"
BAD_COLOUR = "#d62728"
MAX_NAMED_TICKS = 16
"""Up to this many layers each gets its name under the axis; beyond it, only some indices."""
LAYER_TITLE = "cosine per layer vs float (accuracy_analysis)"

Legend = list[tuple[str, str, str]]
"""(label, colour, dash pattern or "marker") per entry."""


@dataclass(frozen=True)
class Frame:
    """The plot area inside the SVG and the data ranges it maps."""

    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    x_range: tuple[float, float]
    y_range: tuple[float, float]
    gap: int = 0
    """Pixels between the lowest tick and the x axis: where non-finite values are marked."""

    def x(self, value: float) -> float:
        low, high = self.x_range
        return self.left + (value - low) / (high - low) * (self.width - self.left - self.right)

    def y(self, value: float) -> float:
        low, high = self.y_range
        return self.floor - self.gap - (value - low) / (high - low) * self.plot_height

    @property
    def plot_height(self) -> float:
        return self.height - self.top - self.bottom - self.gap

    @property
    def floor(self) -> float:
        return self.height - self.bottom


def quantile_plot(baseline: list[float], candidate: list[float] | None, title: str) -> str:
    """The distribution of an output: its quantiles (0..100 %) as lines, locked vs candidate."""
    series = [("baseline (lock)", BASELINE_COLOUR, "", baseline)]
    if candidate is not None:
        series.append(("candidate", CANDIDATE_COLOUR, "6 4", candidate))
    finite = [v for _, _, _, values in series for v in values if math.isfinite(v)]
    if not finite:
        return _empty(title, "no finite values to plot")
    low, high, step = _nice_range(min(finite), max(finite))
    frame = Frame(480, 270, 72, 16, 50, 46, (0.0, 100.0), (low, high))
    parts = [
        _title(frame, title),
        _legend(frame, [(label, colour, dash) for label, colour, dash, _ in series]),
        *_y_axis(frame, step),
        *_x_axis(frame, [(p, f"{p:g}") for p in range(0, 101, 25)]),
        _axis_labels(frame, "quantile (%)", "value"),
    ]
    for label, colour, dash, values in series:
        points = [(_percent(i, len(values)), v) for i, v in enumerate(values)]
        parts += _polylines(frame, points, colour, dash, label)
    return _svg(frame, title, parts)


@dataclass(frozen=True)
class StatMove:
    """One statistic of an output, locked vs now, and how far it may move."""

    statistic: str
    locked: float | None
    now: float | None
    allowed: float

    @property
    def ratio(self) -> float | None:
        """`(now - locked) / allowed`, signed; None where either side has no finite value."""
        if self.locked is None or self.now is None:
            return None
        delta = self.now - self.locked
        if self.allowed > 0:
            return delta / self.allowed
        return 0.0 if delta == 0 else math.copysign(math.inf, delta)

    @property
    def beyond(self) -> bool:
        """Out of the allowed band, as the drift gate judges it (a value that appeared or vanished too)."""
        if self.ratio is None:
            return (self.locked is None) != (self.now is None)
        return not abs(self.ratio) <= 1.0


OK_BAND_COLOUR = "#dafbe1"
MOVE_COLOUR = "#8c959f"


def drift_plot(moves: Sequence[StatMove], title: str) -> str:
    """What moved: each statistic's change `now - locked` as a multiple of what it may move
    (a signed bar on a symmetric log axis), the allowed band ±1 shaded; a bar beyond it is red
    and named with its values, so 202× allowed looks like it, not like two identical curves."""
    ratios = [move.ratio for move in moves]
    finite = [abs(r) for r in ratios if r is not None and math.isfinite(r)]
    reach = _symlog(max([2.0, *finite]) * 1.15)
    row, left, right, top = 22, 44, 230, 46
    frame = Frame(600, top + row * len(moves) + 44, left, right, top, 44, (-reach, reach), (0.0, 1.0))
    zero = frame.x(0.0)
    parts = [
        _title(frame, title),
        _legend(
            frame,
            [
                ("allowed band (±1×)", "#4ac26b", ""),
                ("moved within", MOVE_COLOUR, ""),
                ("beyond", BAD_COLOUR, ""),
            ],
        ),
        f'<rect class="allowed" x="{frame.x(-_symlog(1.0)):.1f}" y="{frame.top}" '
        f'width="{frame.x(_symlog(1.0)) - frame.x(-_symlog(1.0)):.1f}" height="{row * len(moves)}" '
        f'fill="{OK_BAND_COLOUR}"/>',
    ]
    ticks = [0.0] + [sign * 10.0**k for k in range(0, 7) for sign in (1, -1) if _symlog(10.0**k) <= reach]
    floor = frame.top + row * len(moves)
    for tick in ticks:
        x = frame.x(math.copysign(_symlog(abs(tick)), tick))
        parts.append(_line(x, frame.top, x, floor, "#d0d7de" if tick else "#333"))
        parts.append(f'<text x="{x:.1f}" y="{floor + 14}" text-anchor="middle">{_ratio_tick(tick)}</text>')
    parts.append(_axis_caption(frame, floor + 32, "(now − locked) / allowed, symmetric log scale"))
    for index, (move, ratio) in enumerate(zip(moves, ratios, strict=True)):
        y = frame.top + row * index
        name = escape(move.statistic)
        parts.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end" font-weight="bold">{name}</text>')
        if ratio is None:
            gone = f"no finite value: {_value(move.locked)} → {_value(move.now)}"
            fill = BAD_COLOUR if move.beyond else "#666"
            parts.append(f'<text x="{zero + 4:.1f}" y="{y + 15}" fill="{fill}">{escape(gone)}</text>')
            continue
        bad = move.beyond
        end = frame.x(math.copysign(min(_symlog(abs(ratio)), reach), ratio))
        colour = BAD_COLOUR if bad else MOVE_COLOUR
        tooltip = (
            f"{move.statistic}: locked {_value(move.locked)} → now {_value(move.now)}, "
            f"allowed ±{move.allowed:.3g}: {ratio:+.3g}× allowed"
        )
        parts.append(
            f'<rect class="{"moved beyond" if bad else "moved"}" data-statistic={quoteattr(move.statistic)} '
            f'data-ratio="{ratio:.6g}" x="{min(zero, end):.1f}" y="{y + 5}" '
            f'width="{max(abs(end - zero), 1):.1f}" '
            f'height="{row - 10}" fill="{colour}"><title>{escape(tooltip)}</title></rect>'
        )
        label = f"{ratio:+.3g}×: {_value(move.locked)} → {_value(move.now)}"
        fill = f' fill="{BAD_COLOUR}"' if bad else ""
        parts.append(f'<text x="{frame.width - right + 8}" y="{y + 15}"{fill}>{escape(label)}</text>')
    return _svg(frame, title, parts)


def _symlog(value: float) -> float:
    return math.log10(1.0 + value)


def _ratio_tick(tick: float) -> str:
    return "0" if tick == 0 else f"{tick:+g}×"


def _value(value: float | None) -> str:
    return "none" if value is None else f"{value:.4g}"


def _axis_caption(frame: Frame, y: float, text: str) -> str:
    x = (frame.left + frame.width - frame.right) / 2
    return f'<text x="{x:.1f}" y="{y:.0f}" text-anchor="middle" fill="#444">{escape(text)}</text>'


def layer_cosine_plot(layers: list[dict[str, Any]], threshold: float | None = None) -> str:
    """Cosine per layer along the graph (accumulated and on its own); NaN / Inf as red marks.

    `layers` are the consistency gate's `metrics["layers"]`: dicts with op, name,
    entire_cosine and single_cosine. `threshold` draws the tolerance's min cosine.
    """
    if not layers:
        return _empty(LAYER_TITLE, "no layers analysed")
    keys = ("entire_cosine", "single_cosine")
    values = [_as_float(layer.get(key)) for layer in layers for key in keys]
    finite = [v for v in values if math.isfinite(v)] + ([threshold] if threshold is not None else [])
    low, high, step = _nice_range(min(finite, default=0.0), max(finite, default=1.0))
    ticks = _layer_ticks(layers)
    bottom = 84 if len(layers) <= MAX_NAMED_TICKS else 46  # room for the names, set at an angle
    frame = Frame(640, 272 + bottom - 46, 84, 16, 50, bottom, (-0.5, len(layers) - 0.5), (low, high), gap=16)
    legend: Legend = [("accumulated", BASELINE_COLOUR, ""), ("on its own", SINGLE_COLOUR, "6 4")]
    series = list(zip(legend, keys, strict=True))
    if not all(math.isfinite(v) for v in values):
        legend.append(("NaN / Inf", BAD_COLOUR, "marker"))
    if threshold is not None:
        legend.append((f"min cosine {threshold:g}", BAD_COLOUR, "2 3"))
    parts = [
        _title(frame, LAYER_TITLE),
        _legend(frame, legend),
        *_y_axis(frame, step),
        *_x_axis(frame, ticks),
        _axis_labels(frame, "layer (graph order)", "cosine"),
    ]
    if threshold is not None:
        parts.append(_threshold(frame, threshold))
    for (label, colour, dash), key in series:
        points = [(float(i), _as_float(layer.get(key))) for i, layer in enumerate(layers)]
        parts += _polylines(frame, points, colour, dash, label)
        parts += _markers(frame, layers, key, colour, label)
    return _svg(frame, LAYER_TITLE, parts)


def _svg(frame: Frame, title: str, parts: Iterable[str]) -> str:
    body = "\n".join(parts)
    return (
        f'<svg class="plot" viewBox="0 0 {frame.width} {frame.height}" width="{frame.width}" '
        f'height="{frame.height}" role="img" aria-label={quoteattr(title)} '
        f'font-family="sans-serif" font-size="11">\n'
        f'<rect x="0" y="0" width="{frame.width}" height="{frame.height}" fill="#fff"/>\n{body}\n</svg>'
    )


def _empty(title: str, message: str) -> str:
    frame = Frame(480, 80, 10, 10, 30, 10, (0.0, 1.0), (0.0, 1.0))
    note = f'<text x="{frame.width / 2}" y="56" text-anchor="middle" fill="#666">{escape(message)}</text>'
    return _svg(frame, title, [_title(frame, title), note])


def _title(frame: Frame, title: str) -> str:
    return (
        f'<text x="{frame.width / 2}" y="18" text-anchor="middle" font-weight="bold">{escape(title)}</text>'
    )


def _legend(frame: Frame, entries: Legend) -> str:
    """One row under the title, outside the plot area, so it never hides data."""
    x, y = float(frame.left), 36
    items = []
    for label, colour, dash in entries:
        if dash == "marker":
            items.append(
                f'<path d="M{x + 7},{y - 4} l8,8 m0,-8 l-8,8" stroke="{colour}" stroke-width="2.5"/>'
            )
        else:
            pattern = f' stroke-dasharray="{dash}"' if dash else ""
            items.append(_line(x, y, x + 22, y, colour, f' stroke-width="2"{pattern}'))
        items.append(f'<text x="{x + 28:.0f}" y="{y + 4}">{escape(label)}</text>')
        x += 28 + len(label) * 6.2 + 18
    return "\n".join(items)


def _y_axis(frame: Frame, step: float) -> list[str]:
    low, high = frame.y_range
    lines = [_line(frame.left, frame.top, frame.left, frame.floor, "#333")]
    for index in range(round((high - low) / step) + 1):
        tick = low + index * step
        y = frame.y(tick)
        lines.append(_line(frame.left, y, frame.width - frame.right, y, "#e5e5e5"))
        lines.append(
            f'<text x="{frame.left - 6}" y="{y + 4:.1f}" text-anchor="end">{_tick_label(tick, step)}</text>'
        )
    return lines


def _x_axis(frame: Frame, ticks: Sequence[tuple[float, str]]) -> list[str]:
    lines = [_line(frame.left, frame.floor, frame.width - frame.right, frame.floor, "#333")]
    rotate = any(len(label) > 4 for _, label in ticks)
    for value, label in ticks:
        x = frame.x(value)
        lines.append(_line(x, frame.floor, x, frame.floor + 4, "#333"))
        y = frame.floor + 16
        if rotate:
            lines.append(
                f'<text x="{x:.1f}" y="{y}" text-anchor="end" '
                f'transform="rotate(-35 {x:.1f} {y})">{escape(label)}</text>'
            )
        else:
            lines.append(f'<text x="{x:.1f}" y="{y}" text-anchor="middle">{escape(label)}</text>')
    return lines


def _axis_labels(frame: Frame, x_label: str, y_label: str) -> str:
    x = (frame.left + frame.width - frame.right) / 2
    y = frame.top + (frame.floor - frame.top) / 2
    return (
        f'<text x="{x:.1f}" y="{frame.height - 6}" text-anchor="middle" fill="#444">'
        f"{escape(x_label)}</text>\n"
        f'<text x="14" y="{y:.1f}" text-anchor="middle" fill="#444" '
        f'transform="rotate(-90 14 {y:.1f})">{escape(y_label)}</text>'
    )


def _polylines(
    frame: Frame, points: list[tuple[float, float]], colour: str, dash: str, label: str
) -> list[str]:
    """One polyline per finite run: a NaN breaks the line instead of drawing it to zero."""
    runs: list[list[tuple[float, float]]] = [[]]
    for x, y in points:
        if math.isfinite(y):
            runs[-1].append((x, y))
        elif runs[-1]:
            runs.append([])
    pattern = f' stroke-dasharray="{dash}"' if dash else ""
    return [
        f'<polyline class="series" data-series={quoteattr(label)} fill="none" stroke="{colour}" '
        f'stroke-width="2"{pattern} points="{_points(frame, run)}"/>'
        for run in runs
        if run
    ]


def _points(frame: Frame, run: list[tuple[float, float]]) -> str:
    return " ".join(f"{frame.x(x):.1f},{frame.y(y):.1f}" for x, y in run)


def _markers(frame: Frame, layers: list[dict[str, Any]], key: str, colour: str, label: str) -> list[str]:
    """A dot per layer with its name as a tooltip; non-finite cosines are red crosses under the ticks."""
    radius = 3 if len(layers) <= 40 else 1.5
    marks = []
    for index, layer in enumerate(layers):
        value = _as_float(layer.get(key))
        tooltip = f"[{layer.get('op', '?')}] {layer.get('name', '?')}: {label} cosine {value:.6g}"
        x = frame.x(index)
        if math.isfinite(value):
            tag, attributes = "circle", f'cx="{x:.1f}" cy="{frame.y(value):.1f}" r="{radius}" fill="{colour}"'
        else:
            y = frame.floor - frame.gap / 2
            tag, attributes = (
                "path",
                f'class="non-finite" d="M{x - 5:.1f},{y - 5:.1f} l10,10 m0,-10 l-10,10" '
                f'stroke="{BAD_COLOUR}" stroke-width="2.5"',
            )
        marks.append(f"<{tag} {attributes}><title>{escape(tooltip)}</title></{tag}>")
    return marks


def _threshold(frame: Frame, threshold: float) -> str:
    y = frame.y(threshold)
    return _line(frame.left, y, frame.width - frame.right, y, BAD_COLOUR, ' stroke-dasharray="2 3"')


def _line(x1: float, y1: float, x2: float, y2: float, colour: str, extra: str = "") -> str:
    return f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{colour}"{extra}/>'


def _layer_ticks(layers: list[dict[str, Any]]) -> list[tuple[float, str]]:
    if len(layers) <= MAX_NAMED_TICKS:
        return [(float(i), _short(str(layer.get("name", i)))) for i, layer in enumerate(layers)]
    step = math.ceil(len(layers) / 10)
    return [(float(i), str(i)) for i in range(0, len(layers), step)]


def _short(name: str, limit: int = 16) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _percent(index: int, count: int) -> float:
    return 100.0 * index / (count - 1) if count > 1 else 50.0


def _nice_range(low: float, high: float, ticks: int = 5) -> tuple[float, float, float]:
    """Axis bounds on round numbers (a step of 1, 2, 2.5 or 5 × 10^k) around the data."""
    if high - low <= max(abs(low), abs(high)) * 1e-12:
        pad = abs(high) * 0.01 or 1.0
        low, high = low - pad, high + pad
    raw = (high - low) / (ticks - 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw * (1 - 1e-9))
    return math.floor(low / step) * step, math.ceil(high / step) * step, step


def _tick_label(value: float, step: float) -> str:
    """Enough digits to tell neighbouring ticks apart, and no more."""
    if abs(value) < step / 2:
        return "0"
    if max(abs(value), step) >= 1e5 or step < 1e-3:
        significant = math.ceil(math.log10(abs(value) / step)) + 2
        return f"{value:.{min(max(significant, 1), 12)}g}"
    exponent = math.floor(math.log10(step) + 1e-9)
    mantissa = step / 10**exponent
    # a step of 2.5 × 10^k needs one digit more than the step's own magnitude
    decimals = max(0, -exponent + (0 if math.isclose(mantissa, round(mantissa)) else 1))
    return f"{value:.{decimals}f}"


def _as_float(value: Any) -> float:
    """A cosine from metrics; None (NaN after a JSON round trip) counts as not finite."""
    return math.nan if value is None else float(value)
