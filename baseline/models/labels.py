"""Accuracy against ground truth: what a task's `labels` table says, the label files it names, and
the scores the lock pins.

The task gate compares a build with onnxruntime and with its own locked outputs; neither says how
often the model is *right*. A task may name labels for its fixture images (COCO-format boxes for a
detector, masks for a segmenter, class ids for a classifier, transcripts for a CTC recogniser): the
`labels` gate then scores every backend and target against them (mAP@0.5 and mAP@0.5:0.95, mean
IoU, top-1 / top-5, CER), the
lock pins the scores, and verify fails when a build loses more than `max_loss` against its locked
score. Label files are untrusted input (a pull request can change them): they are validated here,
bounded in size, and pinned by hash in the lock.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from baseline.models.base import Name, Record, RelPath

LabelMetric = Literal["map50", "map50_95", "top1", "top5", "cer", "miou"]
"""`map50` / `map50_95`: COCO mAP at IoU 0.5 and averaged over 0.5:0.95 (pycocotools);
`top1` / `top5`: fraction of samples whose label is the best class / among the best five;
`cer`: character error rate over all labelled lines (edit distance / transcript length);
`miou`: mean over the foreground classes of each class's IoU, pixels pooled over the images."""

METRICS: dict[str, tuple[LabelMetric, ...]] = {
    "detection": ("map50", "map50_95"),
    "classification": ("top1", "top5"),
    "ctc": ("cer",),
    "segmentation": ("miou",),
}
"""The metrics each task kind is scored on, in report order."""

LOWER_IS_BETTER: frozenset[str] = frozenset({"cer"})

METRIC_NAMES: dict[str, str] = {
    "map50": "mAP@0.5",
    "map50_95": "mAP@0.5:0.95",
    "top1": "top-1",
    "top5": "top-5",
    "cer": "CER",
    "miou": "mean IoU",
}

DEFAULT_MAX_LOSS = 0.02
"""A metric without its own `max_loss` may lose this much against its locked value."""

MAX_LABEL_BYTES = 16 * 1024 * 1024
"""A label file larger than this is refused before it is parsed (COCO val2017's 5,000 images of
boxes are 20 MB with their polygons; fixtures are a few hundred images at most)."""

MAX_TEXT = 1024
"""Characters of one transcript."""

Loss = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]


class TaskLabels(Record):
    """`[models.tasks.labels]`: ground truth for the fixture images of one task.

    `path` is, for a detection or segmentation task, a COCO-format JSON file (`images` by
    `file_name`, with their `width` and `height`; `annotations` with `bbox` = x, y, w, h in the
    photograph's pixels, for masks `segmentation` polygons too; `category_id` = the model's class
    index); for classification and CTC tasks, a TOML file whose
    `[labels]` table maps a fixture file name to its class index or its text. Fixtures are matched
    by file name; fixtures without a label are not scored.
    """

    path: RelPath
    max_loss: dict[LabelMetric, Loss] = {}
    """Largest allowed loss of a metric against its locked value (a drop of mAP or top-k, a rise
    of CER), per backend and target; unset metrics may lose `DEFAULT_MAX_LOSS`."""
    min_score: float = Field(default=0.001, gt=0, lt=1)
    """Detection: the lowest score kept for mAP (COCO evaluations keep nearly everything; the
    task's `score_threshold` is for agreement, not for ranking)."""
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    """Written by `baseline lock`: the label file's hash, so an edited file needs a new lock."""
    size: int | None = Field(default=None, ge=0)

    def allowed_loss(self, metric: LabelMetric) -> float:
        return float(self.max_loss.get(metric, DEFAULT_MAX_LOSS))


class LabelScore(Record):
    """One task's accuracy against its labels on one backend and target, as locked or measured."""

    task: int = Field(ge=0)
    backend: Name
    target: Name | None = None
    samples: int = Field(ge=0)
    """Labelled fixture samples scored."""
    metrics: dict[LabelMetric, float]

    @property
    def where(self) -> str:
        return self.backend if self.target is None else f"{self.backend}/{self.target}"


def metric_text(metric: str, value: float) -> str:
    return f"{METRIC_NAMES.get(metric, metric)} {value:.3f}"


# ---------------------------------------------------------------- label files (untrusted input)


class _Loose(BaseModel):
    """COCO exports carry keys baseline does not read (`info`, `licenses`, `segmentation`): ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)


FileName = Annotated[str, StringConstraints(min_length=1, max_length=1024)]


class CocoImage(_Loose):
    id: int
    file_name: FileName
    width: int = Field(ge=1, le=65536)
    height: int = Field(ge=1, le=65536)


class CocoAnnotation(_Loose):
    id: int | None = None
    image_id: int
    category_id: int = Field(ge=0, le=100_000)
    bbox: tuple[float, float, float, float]
    """x, y, width, height in the photograph's pixels."""
    segmentation: list[Annotated[list[float], Field(min_length=6, max_length=100_000)]] | None = Field(
        default=None, max_length=1000
    )
    """Polygons (x1, y1, x2, y2, ...) of the object's mask, for a segmentation task (COCO's
    run-length encoding is not read); without them the mask is the box."""
    iscrowd: Literal[0, 1] = 0
    """A crowd region: its detections and pixels count neither for nor against the model."""


class CocoCategory(_Loose):
    id: int = Field(ge=0, le=100_000)
    name: str = Field(default="", max_length=256)


class CocoLabels(_Loose):
    """The parts of a COCO `instances_*.json` a detection score needs."""

    images: list[CocoImage] = Field(min_length=1, max_length=100_000)
    annotations: list[CocoAnnotation] = Field(max_length=1_000_000)
    categories: list[CocoCategory] = Field(default=[], max_length=100_000)


class NamedLabels(Record):
    """A TOML `[labels]` table: fixture file name → class index (classification) or text (CTC)."""

    labels: dict[FileName, Annotated[int, Field(ge=0)] | Annotated[str, Field(max_length=MAX_TEXT)]] = Field(
        min_length=1, max_length=100_000
    )
