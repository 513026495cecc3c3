"""Mean IoU of a segmentation model's label maps against labelled masks (COCO polygons).

The model's map covers its input; the photograph sits in it stretched or letterboxed into the
top-left corner (`baseline.files.images`). Its part of the map is cut out and scaled (nearest) to the
photograph's pixels, where the labels' polygons are drawn. IoU is pooled over the images per
class (intersections and unions summed, as segmentation benchmarks do), then averaged over the
foreground classes present in the labels or the predictions: class 0 is the background, whose IoU
would dominate a text map's. Crowd annotations mark pixels that count for no class.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

import numpy as np

from baseline.errors import InputError
from baseline.models.labels import CocoAnnotation, CocoImage, CocoLabels
from baseline.models.task import SegmentationTask
from baseline.tasks.samples import class_last, split_images
from baseline.tasks.segmentation import label_map


@dataclass(frozen=True)
class Geometry:
    """How a photograph became the model input: its size and whether it was letterboxed."""

    input_height: int
    input_width: int
    letterbox: bool


IGNORED = -1
"""A crowd pixel: neither a hit nor a miss for any class."""


@dataclass
class _Pooled:
    intersection: dict[int, int]
    union: dict[int, int]

    def add(self, truth: np.ndarray, predicted: np.ndarray) -> None:
        counted = truth != IGNORED
        for class_id in np.union1d(np.unique(truth[counted]), np.unique(predicted[counted])).tolist():
            if class_id == 0:
                continue
            in_truth, in_predicted = (truth == class_id) & counted, (predicted == class_id) & counted
            self.intersection[class_id] = self.intersection.get(class_id, 0) + int(
                np.count_nonzero(in_truth & in_predicted)
            )
            self.union[class_id] = self.union.get(class_id, 0) + int(
                np.count_nonzero(in_truth | in_predicted)
            )

    def mean_iou(self) -> float:
        ious = [self.intersection[c] / self.union[c] for c in self.union if self.union[c]]
        return float(np.mean(ious)) if ious else 1.0  # nothing labelled, nothing predicted


def mask_scores(
    task: SegmentationTask,
    labels: CocoLabels,
    outputs: Mapping[str, np.ndarray],
    samples: dict[str, int],
    geometry: Geometry,
    where: str,
) -> tuple[int, float]:
    """(labelled images, mean IoU) of one run's segmentation output."""
    images = [image for image in labels.images if PurePosixPath(image.file_name).name in samples]
    if not images:
        raise InputError(
            f"{where}: no image of the COCO labels is a fixture ({', '.join(sorted(samples)[:4])}, ...)"
        )
    scores = class_last(np.asarray(outputs[task.output]), task.class_axis, "segmentation output")
    maps = {ref.sample: label_map(task, image) for ref, image in split_images(scores, 3, task.output)}
    pooled = _Pooled({}, {})
    for image in images:
        predicted = _on_photo(maps[samples[PurePosixPath(image.file_name).name]], image, geometry)
        pooled.add(_truth(image, [a for a in labels.annotations if a.image_id == image.id]), predicted)
    return len(images), pooled.mean_iou()


def _on_photo(labels: np.ndarray, image: CocoImage, geometry: Geometry) -> np.ndarray:
    """The map's part that shows the photograph, scaled (nearest) to the photograph's pixels."""
    height, width = labels.shape
    if geometry.letterbox:
        scale = min(geometry.input_height / image.height, geometry.input_width / image.width)
        shown_w, shown_h = max(1, round(image.width * scale)), max(1, round(image.height * scale))
    else:
        shown_w, shown_h = geometry.input_width, geometry.input_height
    cols = max(1, round(shown_w * width / geometry.input_width))
    rows = max(1, round(shown_h * height / geometry.input_height))
    row_index = np.minimum((np.arange(image.height) * rows) // image.height, height - 1)
    col_index = np.minimum((np.arange(image.width) * cols) // image.width, width - 1)
    return np.asarray(labels[np.ix_(row_index, col_index)])


def _truth(image: CocoImage, annotations: list[CocoAnnotation]) -> np.ndarray:
    """The labelled classes per pixel: polygons (or boxes) drawn in file order, crowds last."""
    from PIL import Image, ImageDraw

    canvas = Image.new("I", (image.width, image.height), 0)
    draw = ImageDraw.Draw(canvas)
    for annotation in sorted(annotations, key=lambda a: a.iscrowd):
        fill = IGNORED if annotation.iscrowd else annotation.category_id
        x, y, w, h = annotation.bbox
        polygons = annotation.segmentation or [[x, y, x + w, y, x + w, y + h, x, y + h]]
        for polygon in polygons:
            draw.polygon(list(zip(polygon[0::2], polygon[1::2], strict=False)), fill=fill)
    return np.asarray(canvas, dtype=np.int64)
