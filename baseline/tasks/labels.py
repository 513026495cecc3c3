"""Scoring a model's outputs against ground truth: mAP (pycocotools), mean IoU, top-1 / top-5, CER.

`read_labels` validates a label file (bounded, typed, one-line errors naming the file and key);
`pin_labels` is what `baseline lock` writes into the task; `score_task` decodes one run's outputs
as the task says and scores them against the labels of the fixture images they came from.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
from pydantic import ValidationError

from baseline.errors import InputError
from baseline.files.hashing import sha256_bytes
from baseline.files.textsafe import one_line
from baseline.files.tomlfile import parse_toml, read_config_bytes
from baseline.models.labels import (
    MAX_LABEL_BYTES,
    METRICS,
    CocoLabels,
    LabelMetric,
    LabelScore,
    NamedLabels,
    TaskLabels,
)
from baseline.models.lock import ModelLock
from baseline.models.task import ClassificationTask, CtcTask, DetectionTask, SegmentationTask, TaskSpec
from baseline.tasks.ctc import greedy_decode, render_text
from baseline.tasks.label_masks import Geometry as Geometry  # re-exported: callers build one
from baseline.tasks.label_masks import mask_scores
from baseline.tasks.samples import class_last, split_images

Labels = CocoLabels | NamedLabels


# ---------------------------------------------------------------- reading and pinning


def read_labels(path: Path, task: TaskSpec, where: str) -> tuple[Labels, bytes]:
    """The validated labels of `task` from `path`, and the bytes they were read from."""
    data = _bounded_bytes(path, where)
    if _scoring(task).boxes:
        coco = _parsed(CocoLabels, _json(data, path, where), path, where)
        assert isinstance(coco, CocoLabels)
        _check_coco(coco, path, where)
        return coco, data
    named = _parsed(NamedLabels, _toml(data, path, where), path, where)
    assert isinstance(named, NamedLabels)
    _check_named(named, task, path, where)
    return named, data


def pin_labels(task: TaskSpec, resolve_file: Path, where: str) -> TaskLabels:
    """The task's `labels` as the lock pins them: checked, with the file's hash and size."""
    labels = _labels_of(task)
    _check_losses(labels, task, where)
    _, data = read_labels(resolve_file, task, f"{where}.path")
    return labels.model_copy(update={"sha256": sha256_bytes(data), "size": len(data)})


def locked_labels(task: TaskSpec, path: Path, where: str) -> Labels:
    """The labels the lock pinned: refused when the file changed since."""
    labels = _labels_of(task)
    parsed, data = read_labels(path, task, where)
    if labels.sha256 is not None and sha256_bytes(data) != labels.sha256:
        raise InputError(f"{where}: {path.name} changed since the lock was written; run `baseline lock`")
    return parsed


def _labels_of(task: TaskSpec) -> TaskLabels:
    labels = getattr(task, "labels", None)
    assert isinstance(labels, TaskLabels), "only labelled tasks are pinned or scored"
    return labels


def _check_losses(labels: TaskLabels, task: TaskSpec, where: str) -> None:
    known = METRICS[task.kind]
    for metric in labels.max_loss:
        if metric not in known:
            raise InputError(
                f"{where}.max_loss.{metric}: a {task.kind} task is scored on {', '.join(known)}; "
                f"remove {metric!r} or name one of those"
            )
    if isinstance(task, CtcTask) and task.alphabet is None and task.alphabet_file is None:
        raise InputError(
            f"{where}: transcripts are compared as text; set the task's alphabet or alphabet_file"
        )


def _bounded_bytes(path: Path, where: str) -> bytes:
    data = read_config_bytes(path, f"label file of {where}", "fix the path or the file")
    if len(data) > MAX_LABEL_BYTES:
        raise InputError(f"{where}: {path.name} is over {MAX_LABEL_BYTES // 2**20} MiB; label fewer images")
    return data


def _json(data: bytes, path: Path, where: str) -> object:
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as error:
        raise InputError(f"{where}: {path.name} is not JSON (a COCO labels file): {error}") from None


def _toml(data: bytes, path: Path, where: str) -> object:
    return parse_toml(data, path, f"label file of {where}", "write a [labels] table of file name = label")


def _parsed(record: type[CocoLabels] | type[NamedLabels], raw: object, path: Path, where: str) -> Labels:
    try:
        return record.model_validate(raw)
    except ValidationError as error:
        first = error.errors()[0]
        key = ".".join(str(part) for part in first["loc"]) or "(top level)"
        # keys may be the file's own (a fixture name in `[labels]`): one line whatever they hold
        raise InputError(f"{where}: {path.name}: {one_line(key)}: {one_line(first['msg'])}") from None


def _check_coco(labels: CocoLabels, path: Path, where: str) -> None:
    ids = [image.id for image in labels.images]
    if len(set(ids)) != len(ids):
        raise InputError(f"{where}: {path.name}: images: an image id is used twice")
    names = [PurePosixPath(image.file_name).name for image in labels.images]
    if len(set(names)) != len(names):
        raise InputError(f"{where}: {path.name}: images: a file name is listed twice")
    known = set(ids)
    for index, annotation in enumerate(labels.annotations):
        if annotation.image_id not in known:
            raise InputError(
                f"{where}: {path.name}: annotations.{index}.image_id: no image has id {annotation.image_id}"
            )
        if annotation.bbox[2] <= 0 or annotation.bbox[3] <= 0 or not all(map(math.isfinite, annotation.bbox)):
            raise InputError(f"{where}: {path.name}: annotations.{index}.bbox: width and height must be > 0")


def _check_named(labels: NamedLabels, task: TaskSpec, path: Path, where: str) -> None:
    wanted = _scoring(task).named
    for name, value in labels.labels.items():
        if not isinstance(value, wanted):
            what = "a class index" if wanted is int else "a text"
            raise InputError(
                f"{where}: {path.name}: labels.{one_line(repr(name))}: a {task.kind} label is {what}"
            )


# ---------------------------------------------------------------- scoring


def score_task(
    task: TaskSpec,
    labels: Labels,
    outputs: Mapping[str, np.ndarray],
    files: Sequence[str],
    geometry: Geometry | None,
    where: str,
) -> tuple[int, dict[LabelMetric, float]]:
    """(labelled samples, metrics) of one run's outputs; `files` names the fixture image of each
    sample (its order), `geometry` maps a detector's boxes back onto the photographs."""
    run = LabelledRun(outputs, _samples_by_name(files, where), geometry, where)
    return _scoring(task).score(task, labels, run)


Samples = dict[str, int]
"""Fixture file name → sample index."""


@dataclass(frozen=True)
class LabelledRun:
    """One run's outputs to score: the fixture sample of each labelled file name, the geometry
    that maps boxes and masks back onto the photographs, and where errors point."""

    outputs: Mapping[str, np.ndarray]
    samples: Samples
    geometry: Geometry | None
    where: str


Scorer = Callable[[Any, Any, LabelledRun], tuple[int, dict[LabelMetric, float]]]


@dataclass(frozen=True)
class LabelScoring:
    """How one task kind's labels are written and scored: COCO boxes or masks (`boxes`), else a
    TOML map of file name to a label of type `named`; `score` gives (labelled samples, metrics)."""

    boxes: bool
    named: type
    score: Scorer


def _score_masks(
    task: SegmentationTask,
    labels: CocoLabels,
    run: LabelledRun,
) -> tuple[int, dict[LabelMetric, float]]:
    if run.geometry is None:
        raise InputError(f"{run.where}: mask labels need a static image input to map the masks onto")
    count, iou = mask_scores(task, labels, run.outputs, run.samples, run.geometry, run.where)
    return count, {"miou": iou}


def _score_classes(
    task: ClassificationTask,
    labels: NamedLabels,
    run: LabelledRun,
) -> tuple[int, dict[LabelMetric, float]]:
    matched, per_sample = _named_samples(task, 1, labels, run)
    return len(matched), _classification_scores(per_sample, matched)


def _score_texts(
    task: CtcTask,
    labels: NamedLabels,
    run: LabelledRun,
) -> tuple[int, dict[LabelMetric, float]]:
    matched, per_sample = _named_samples(task, 2, labels, run)
    return len(matched), {"cer": _cer(task, per_sample, matched)}


def _named_samples(
    task: ClassificationTask | CtcTask,
    dims: int,
    labels: NamedLabels,
    run: LabelledRun,
) -> tuple[dict[int, int | str], dict[int, np.ndarray]]:
    """The labelled samples (index → label) and each sample's class scores, classes last."""
    samples = run.samples
    matched = {samples[name]: value for name, value in labels.labels.items() if name in samples}
    if not matched:
        raise InputError(
            f"{run.where}: no label names a fixture image ({', '.join(sorted(samples)[:4])}, ...)"
        )
    scores = class_last(np.asarray(run.outputs[task.output]), task.class_axis, f"{task.kind} output")
    return matched, {ref.sample: image for ref, image in split_images(scores, dims, task.output)}


def _samples_by_name(files: Sequence[str], where: str) -> dict[str, int]:
    """Fixture file name → sample index; two fixtures of one name cannot be told apart."""
    samples: dict[str, int] = {}
    for index, path in enumerate(files):
        name = PurePosixPath(path).name
        if name in samples:
            raise InputError(f"{where}: two fixture images are named {name!r}; labels match by file name")
        samples[name] = index
    return samples


def _classification_scores(
    per_sample: dict[int, np.ndarray], matched: dict[int, int | str]
) -> dict[LabelMetric, float]:
    """Top-1 and top-5 accuracy; top-5 only with more than five classes (else every label is in it)."""
    top1 = top5 = 0
    classes = 0
    for sample, label in matched.items():
        order = np.argsort(-np.nan_to_num(per_sample[sample], nan=-np.inf), kind="stable")
        classes = len(order)
        top1 += int(order[0] == label)
        top5 += int(label in order[:5].tolist())
    scores: dict[LabelMetric, float] = {"top1": top1 / len(matched)}
    return scores | ({"top5": top5 / len(matched)} if classes > 5 else {})


def _cer(task: CtcTask, per_sample: dict[int, np.ndarray], matched: dict[int, int | str]) -> float:
    """Edit distance summed over lines, over the transcripts' total length (corpus CER)."""
    from baseline.tasks.ctc import edit_distance

    symbols = task.symbols(None)
    errors = length = 0
    for sample, text in matched.items():
        read = render_text(greedy_decode(per_sample[sample], task.blank), symbols, task.blank)
        errors += edit_distance([ord(c) for c in str(text)], [ord(c) for c in read])
        length += len(str(text))
    return errors / length if length else 0.0


def _detection_scores(
    task: DetectionTask,
    labels: CocoLabels,
    run: LabelledRun,
) -> tuple[int, dict[LabelMetric, float]]:
    if run.geometry is None:
        raise InputError(f"{run.where}: detection labels need a static image input to map boxes onto")
    from baseline.tasks.detection import detect, image_outputs

    outputs, samples, geometry, where = run.outputs, run.samples, run.geometry, run.where

    images = {image.id: image for image in labels.images if PurePosixPath(image.file_name).name in samples}
    if not images:
        raise InputError(
            f"{where}: no image of the COCO labels is a fixture ({', '.join(sorted(samples)[:4])}, ...)"
        )
    arrays = [np.asarray(outputs[name]) for name in task.read]
    min_score = _labels_of(task).min_score
    decoded = {ref.sample: image for ref, image in image_outputs(task, arrays if task.outputs else arrays[0])}
    results = []
    for image in images.values():
        found = detect(task, decoded[samples[PurePosixPath(image.file_name).name]], min_score)
        boxes = _to_photo(found.boxes, image.width, image.height, geometry)
        results += [
            {"image_id": image.id, "category_id": int(c), "bbox": [float(v) for v in box], "score": float(s)}
            for box, s, c in zip(boxes, found.scores, found.classes, strict=True)
        ]
    return len(images), _coco_map(labels, list(images), results)


def _to_photo(boxes: np.ndarray, width: int, height: int, geometry: Geometry) -> np.ndarray:
    """Corners in model-input pixels → x, y, w, h in the photograph's pixels (the inverse of how
    `baseline.files.images` fed it: stretched, or scaled and padded bottom-right)."""
    if geometry.letterbox:
        scale = min(geometry.input_height / height, geometry.input_width / width)
        scaled_w, scaled_h = max(1, round(width * scale)), max(1, round(height * scale))
    else:
        scaled_w, scaled_h = geometry.input_width, geometry.input_height
    factor = np.array([width / scaled_w, height / scaled_h, width / scaled_w, height / scaled_h])
    corners = np.nan_to_num(boxes.reshape(-1, 4) * factor)
    corners = np.clip(corners, 0, [width, height, width, height])
    return np.concatenate([corners[:, :2], corners[:, 2:] - corners[:, :2]], axis=1)


def _coco_map(
    labels: CocoLabels, image_ids: list[int], results: list[dict[str, object]]
) -> dict[LabelMetric, float]:
    """COCO mAP@0.5 and mAP@0.5:0.95 by pycocotools, over the fixture images only."""
    if not results:
        return {"map50": 0.0, "map50_95": 0.0}
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    truth = COCO()
    categories = [c.model_dump() for c in labels.categories] or [
        {"id": c} for c in sorted({a.category_id for a in labels.annotations})
    ]
    truth.dataset = {
        "info": {},  # pycocotools 2.0.9 copies it into the results
        "images": [image.model_dump() for image in labels.images],
        "annotations": [_annotation(index, a) for index, a in enumerate(labels.annotations, start=1)],
        "categories": categories,
    }
    # pycocotools prints its progress to stdout, which is the report's channel (`--format json`)
    with contextlib.redirect_stdout(io.StringIO()):
        truth.createIndex()
        evaluation = COCOeval(truth, truth.loadRes(results), "bbox")
        evaluation.params.imgIds = image_ids
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    # -1: no ground-truth box at all on these images; nothing to find, nothing found right
    return {"map50": _at_least_zero(evaluation.stats[1]), "map50_95": _at_least_zero(evaluation.stats[0])}


def _annotation(index: int, annotation: object) -> dict[str, object]:
    from baseline.models.labels import CocoAnnotation

    assert isinstance(annotation, CocoAnnotation)
    x, y, w, h = annotation.bbox
    return {
        "id": index,  # pycocotools indexes by id: the file's own ids may repeat
        "image_id": annotation.image_id,
        "category_id": annotation.category_id,
        "bbox": [x, y, w, h],
        "area": max(w, 0.0) * max(h, 0.0),
        "iscrowd": annotation.iscrowd,
    }


def _at_least_zero(value: float) -> float:
    return 0.0 if not math.isfinite(value) or value < 0 else float(value)


SCORING: dict[str, LabelScoring] = {
    "detection": LabelScoring(boxes=True, named=str, score=_detection_scores),
    "segmentation": LabelScoring(boxes=True, named=str, score=_score_masks),
    "classification": LabelScoring(boxes=False, named=int, score=_score_classes),
    "ctc": LabelScoring(boxes=False, named=str, score=_score_texts),
}
"""Each labelled kind's scoring, keyed by the records' `kind` literal as `METRICS` is (the
metrics it reports): a kind without an entry takes no labels."""


def _scoring(task: TaskSpec) -> LabelScoring:
    return SCORING[task.kind]


# ---------------------------------------------------------------- a model's scores


def labelled(model: ModelLock) -> list[int]:
    """Indices of the model's tasks that name labels."""
    return [index for index, task in enumerate(model.tasks) if getattr(task, "labels", None) is not None]


def geometry_of(model: ModelLock, fixtures: Mapping[str, np.ndarray]) -> Geometry | None:
    """The image input's size, from the pixel fixtures (`[samples, 1, H, W, 3]`), and its resize."""
    images = model.fixtures.images
    if images is None or images.input not in fixtures:
        return None
    shape = np.shape(fixtures[images.input])
    return Geometry(int(shape[-3]), int(shape[-2]), images.resize == "letterbox")


def load_model_labels(model: ModelLock, resolve: Callable[[str, str], Path], where: str) -> dict[int, Labels]:
    """The labels of every labelled task of `model`, as pinned (refused when a file changed)."""
    if model.fixtures.images is None and labelled(model):
        raise InputError(
            f"{where}.tasks[{labelled(model)[0]}].labels: labels name fixture images; set fixtures.images"
        )
    loaded = {}
    for index in labelled(model):
        task = model.tasks[index]
        labels = _labels_of(task)
        key = f"{where}.tasks[{index}].labels"
        loaded[index] = locked_labels(task, resolve(labels.path, f"{key}.path"), key)
    return loaded


def model_scores(
    model: ModelLock,
    labels: Mapping[int, Labels],
    outputs: Mapping[str, np.ndarray],
    geometry: Geometry | None,
    backend: str,
    target: str | None,
) -> list[LabelScore]:
    """Every labelled task's score on one run's outputs."""
    assert model.fixtures.images is not None
    files = [pin.path for pin in model.fixtures.images.files]
    scores = []
    for index, parsed in labels.items():
        where = f"model {model.name!r}: tasks[{index}].labels"
        samples, metrics = score_task(model.tasks[index], parsed, outputs, files, geometry, where)
        scores.append(
            LabelScore(task=index, backend=backend, target=target, samples=samples, metrics=metrics)
        )
    return scores
