"""What a failed task comparison looks like: detections drawn on the fixture photograph, golden
and candidate in two colours; segmentation masks, golden | candidate | changed pixels, laid over
it; and the changed classes, texts and results side by side.

Shared by the HTML report and the HTML sign-off. The photograph is the fixture file itself,
inlined as a `data:` image (see `baseline.files.pictures`); without one the boxes are drawn on a
blank canvas of the model's coordinates.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from html import escape

from baseline.files.pictures import FixturePicture, PictureSource
from baseline.gates.task import TaskCheck, TaskMetrics
from baseline.models.lock import Lock
from baseline.models.results import GateResult, Report
from baseline.models.task import (
    Box,
    DetectionComparison,
    DetectionSample,
    LabelMap,
    SegmentationComparison,
    SegmentationSample,
    TaskComparison,
)
from baseline.report.masks import class_hex, data_uri, disagreement, disagreement_png, labels_png
from baseline.tasks.kinds import kind_of
from baseline.tasks.verdicts import class_label

GOLDEN_COLOUR = "#0072b2"
CANDIDATE_COLOUR = "#d62728"
DISPLAY_WIDTH = 480
MAX_PICTURES = 24
"""Pictures per page: each inlines a photograph; a run that fails everywhere needs only some."""
MAX_ROWS = 50
MASK_WIDTH = 300
"""Display width of each of a segmentation's three panels."""
MAX_KEY_CLASSES = 12


def tasks_section(report: Report, lock: Lock | None, pictures: PictureSource | None) -> str:
    """Every failed task comparison: pictures for detections, side-by-side tables for the rest.
    The lock, when given, supplies the class names of the labels."""
    blocks: list[str] = []
    budget = [MAX_PICTURES]
    for result in report.results:
        if isinstance(result.metrics, TaskMetrics):
            blocks += [_check_block(result, check, lock, pictures, budget) for check in result.metrics.failed]
    if not blocks:
        return ""
    return '<section id="tasks"><h2>Task comparisons that failed</h2>' + "\n".join(blocks) + "</section>"


def _check_block(
    result: GateResult, check: TaskCheck, lock: Lock | None, pictures: PictureSource | None, budget: list[int]
) -> str:
    outcome = check.outcome
    heading = f"<h3>{escape(result.model)} · {escape(result.where)} · against {escape(check.against)}</h3>"
    summary = f'<p class="note">{escape(outcome.summary)}</p>'
    comparison = outcome.comparison
    names = _class_names(lock, result.model, outcome.output)
    if isinstance(comparison, DetectionComparison):
        figures = _detection_figures(result.model, comparison, names, pictures, budget)
        return heading + summary + figures + _flip_table(comparison, names)
    if isinstance(comparison, SegmentationComparison):
        figures = _segmentation_figures(result.model, comparison, names, pictures, budget)
        return heading + summary + figures + _side_by_side(comparison, names)
    return heading + summary + _side_by_side(comparison, names)


def _side_by_side(comparison: TaskComparison | None, names: list[str]) -> str:
    """Golden and candidate answers of the samples that changed, in two columns."""
    if comparison is None:
        return ""
    changed = kind_of(comparison.kind).changed(comparison, names)
    return table(changed.headers, changed.rows)


def _class_names(lock: Lock | None, model: str, output: str) -> list[str]:
    """The task's class names, from the lock (the result holds class indices only)."""
    entry = lock.model(model) if lock is not None else None
    tasks = entry.tasks if entry is not None else []
    named = (kind_of(t.kind).class_names(t) for t in tasks if t.output == output)
    return next((names for names in named if names), [])


def _detection_figures(
    model: str,
    comparison: DetectionComparison,
    names: list[str],
    pictures: PictureSource | None,
    budget: list[int],
) -> str:
    figures = []
    for sample in comparison.samples:
        if _unchanged(sample) or budget[0] <= 0:
            continue
        budget[0] -= 1
        picture = pictures(model, sample.where.sample) if pictures is not None else None
        svg = detection_svg(sample.golden_boxes, sample.candidate_boxes, names, picture, sample.where.label)
        caption = (
            f"{sample.where.label}: golden {sample.golden} (blue, solid), candidate {sample.candidate} "
            f"(red, dashed), {sample.matched} matched"
        )
        figures.append(f"<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>")
    return '<div class="figures">' + "\n".join(figures) + "</div>" if figures else ""


def _segmentation_figures(
    model: str,
    comparison: SegmentationComparison,
    names: list[str],
    pictures: PictureSource | None,
    budget: list[int],
) -> str:
    """Per sample that disagrees (worst first): golden, candidate and the changed pixels, each over
    the fixture photograph (or a blank canvas), and a key of the classes that changed."""
    figures = []
    for sample in sorted(comparison.samples, key=lambda s: s.pixel_agreement):
        golden, candidate = sample.golden_labels, sample.candidate_labels
        if golden is None or candidate is None or budget[0] <= 0:
            continue
        budget[0] -= 1
        picture = pictures(model, sample.where.sample) if pictures is not None else None
        _, changed = disagreement(golden, candidate)
        label = sample.where.label
        photo = f"photo-{budget[0]}"  # the photograph is inlined once; the other panels <use> it
        overlays = [
            (golden, labels_png(golden), "golden"),
            (candidate, labels_png(candidate), "candidate"),
            (golden, disagreement_png(golden, candidate), "changed"),
        ]
        panels = [
            mask_svg(labels, data_uri(png), picture, f"{label} {kind}", kind, photo, first=index == 0)
            for index, (labels, png, kind) in enumerate(overlays)
        ]
        caption = (
            f"{label}: golden | candidate | pixels whose class changed (red, {changed} of "
            f"{golden.width * golden.height}{_stride_note(golden)}); pixel agreement "
            f"{sample.pixel_agreement:.4f}, mean IoU {sample.mean_iou:.3f}"
        )
        figures.append(
            f'<figure class="segmentation"><div class="panels">{"".join(panels)}</div>'
            f"<figcaption>{escape(caption)}{_class_key(sample, names)}</figcaption></figure>"
        )
    return '<div class="figures">' + "\n".join(figures) + "</div>" if figures else ""


def _stride_note(labels: LabelMap) -> str:
    return f", every {labels.stride}th pixel a side" if labels.stride > 1 else ""


def _class_key(sample: SegmentationSample, names: list[str]) -> str:
    """A swatch per class in the pictures (class 0 is drawn clear), with its IoU."""
    items = [
        f'<li><span class="swatch" style="background:{class_hex(c.class_id)}">'
        f"</span>{escape(f'{class_label(c.class_id, names)}: IoU {c.iou:.3f}, ')}"
        f"{escape(f'{c.golden_pixels} → {c.candidate_pixels} px')}</li>"
        for c in sorted(sample.classes, key=lambda c: c.iou)
        if c.class_id != 0
    ][:MAX_KEY_CLASSES]
    return f'<ul class="classes">{"".join(items)}</ul>' if items else ""


def mask_svg(
    labels: LabelMap,
    overlay: str,
    picture: FixturePicture | None,
    title: str,
    kind: str,
    photo: str,
    first: bool,
) -> str:
    """One label map (a `data:` PNG) stretched over the photograph's model input, or over a blank
    canvas of the output's size; the changed-pixels panel dims the photograph to make red stand out.
    The first panel inlines the photograph as `id=photo`, the others `<use>` it."""
    if picture is not None:
        width, height = picture.width, picture.height
        background = (
            _background(picture, width, height).replace("<image ", f'<image id="{photo}" ', 1)
            if first
            else f'<use href="#{photo}"/>'
        )
    else:
        width, height = labels.width * labels.stride, labels.height * labels.stride
        background = _background(None, width, height)
    dim = (
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fff" opacity="0.6"/>'
        if kind == "changed"
        else ""
    )
    return (
        f'<svg class="plot masks {kind}" viewBox="0 0 {width} {height}" width="{MASK_WIDTH}" '
        f'height="{round(MASK_WIDTH * height / width)}" role="img"><title>{escape(title)}</title>'
        f"{background}{dim}"
        f'<image class="mask" x="0" y="0" width="{width}" height="{height}" preserveAspectRatio="none" '
        f'href="{overlay}"/></svg>'
    )


def _unchanged(sample: DetectionSample) -> bool:
    return (
        not sample.class_flips
        and sample.matched == sample.golden == sample.candidate
        and (sample.mean_iou is None or sample.mean_iou > 0.999)
    )


def _flip_table(comparison: DetectionComparison, names: list[str]) -> str:
    flips = kind_of(comparison.kind).changed(comparison, names)
    return table(flips.headers, flips.rows) if flips.rows else ""


def detection_svg(
    golden: list[Box], candidate: list[Box], names: list[str], picture: FixturePicture | None, title: str
) -> str:
    """The photograph (or a blank canvas) with golden boxes solid and candidate boxes dashed."""
    width, height = (picture.width, picture.height) if picture is not None else _extent([*golden, *candidate])
    stroke = max(width, height) / 320
    parts = [
        f'<svg class="plot detections" viewBox="0 0 {width} {height}" width="{DISPLAY_WIDTH}" '
        f'height="{round(DISPLAY_WIDTH * height / width)}" role="img"><title>{escape(title)}</title>',
        _background(picture, width, height),
    ]
    # golden wide and solid under candidate thin and dashed: a box both found shows both colours
    parts += [_box(box, "golden", GOLDEN_COLOUR, "", 2.5 * stroke, names) for box in golden]
    parts += [
        _box(
            box,
            "candidate",
            CANDIDATE_COLOUR,
            f' stroke-dasharray="{4 * stroke:g} {2 * stroke:g}"',
            stroke,
            names,
        )
        for box in candidate
    ]
    return "".join(parts) + "</svg>"


def _background(picture: FixturePicture | None, width: int, height: int) -> str:
    if picture is None:
        return f'<rect x="0" y="0" width="{width}" height="{height}" fill="#eaeef2"/>'
    data = base64.b64encode(picture.data).decode("ascii")
    fit = "xMinYMin meet" if picture.letterbox else "none"
    return (
        f'<image x="0" y="0" width="{width}" height="{height}" preserveAspectRatio="{fit}" '
        f'href="data:{picture.mime};base64,{data}"/>'
    )


def _box(box: Box, side: str, colour: str, dash: str, stroke: float, names: list[str]) -> str:
    label = f"{class_label(box.class_id, names)} {box.score:.2f}"
    font = 4 * stroke if side == "golden" else 10 * stroke  # the same size: golden strokes are 2.5x
    # golden labels sit above the box, candidate labels inside its bottom edge: both stay readable
    y = box.y1 - stroke if side == "golden" else box.y2 - stroke
    return (
        f'<rect class="{side}" data-class="{box.class_id}" x="{box.x1:.1f}" y="{box.y1:.1f}" '
        f'width="{max(box.x2 - box.x1, 0):.1f}" height="{max(box.y2 - box.y1, 0):.1f}" fill="none" '
        f'stroke="{colour}" stroke-width="{stroke:g}"{dash}/>'
        f'<text x="{box.x1:.1f}" y="{y:.1f}" font-size="{font:g}" fill="{colour}">{escape(label)}</text>'
    )


def _extent(boxes: list[Box]) -> tuple[int, int]:
    """A canvas that holds every box when there is no photograph to size it."""
    width = max((box.x2 for box in boxes), default=1.0)
    height = max((box.y2 for box in boxes), default=1.0)
    return max(1, round(width)), max(1, round(height))


def table(columns: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    """A side-by-side table, at most `MAX_ROWS` rows (the failure lines list every one)."""
    if not rows:
        return ""
    head = "".join(f"<th>{escape(column)}</th>" for column in columns)
    body = "".join(
        "<tr>" + "".join(f"<td><code>{escape(cell)}</code></td>" for cell in row) + "</tr>"
        for row in rows[:MAX_ROWS]
    )
    more = f'<p class="note">{len(rows) - MAX_ROWS} more rows not shown</p>' if len(rows) > MAX_ROWS else ""
    return f'<table class="sides"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}'
