"""The task gate's thresholds against onnxruntime, apart from those against the locked outputs.

The task gate judges a build twice: against its own locked outputs (what changed since sign-off:
for an unchanged model, reconversion noise only) and against onnxruntime today (how far the NPU
build is from the float model: quantization's spread). One set of thresholds for both let a
w8a8 build's spread against onnxruntime (PP-OCRv4 rec: CER 0.125) loosen the check against the
locked outputs too, which then missed a two-character regression. So a task's own thresholds
judge the locked comparison only, and the onnxruntime comparison may relax them per build kind,
as consistency tolerances are split: `[models.tasks.golden]` for float (fp16) builds,
`[models.tasks.golden_quantized]` for quantized ones. Both are partial: an unset key keeps the
task's own value; the quantized table does not inherit from the fp16 one.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeVar

from pydantic import Field

from baseline.models.base import Record

Fraction = Annotated[float, Field(ge=0, le=1)]

GoldenTable = Literal["golden", "golden_quantized"]
TaskTable = Literal["task", "golden", "golden_quantized"]
"""Where a threshold is read: the task's own (against the locked outputs) or an override."""


class ClassificationGolden(Record):
    min_top1_agreement: Fraction | None = None
    min_topk_agreement: Fraction | None = None
    max_probability_change: float | None = Field(default=None, ge=0, le=1)


class DetectionGolden(Record):
    min_recall: Fraction | None = None
    min_precision: Fraction | None = None
    min_mean_iou: Fraction | None = None
    max_class_flips: int | None = Field(default=None, ge=0)


class SegmentationGolden(Record):
    min_pixel_agreement: Fraction | None = None
    min_mean_iou: Fraction | None = None


class CtcGolden(Record):
    max_cer: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    require_equal_text: bool | None = None


TaskT = TypeVar("TaskT", bound=Record)


def golden_table(quantized: bool) -> GoldenTable:
    return "golden_quantized" if quantized else "golden"


def against_golden(task: TaskT, quantized: bool) -> TaskT:
    """`task` with the thresholds that judge a build (quantized or not) against onnxruntime."""
    return thresholds_of(task, golden_table(quantized))


def thresholds_of(task: TaskT, table: TaskTable) -> TaskT:
    """The thresholds `table` judges with: the task's own, or with that override applied."""
    override = None if table == "task" else getattr(task, table, None)
    if override is None:  # unset, or a team post-processing task (no thresholds of its own)
        return task
    return task.model_copy(update=override.model_dump(exclude_none=True))


def lower_bound(field: str) -> bool:
    """Whether a threshold is one a measured value must reach (the rest it must not exceed): every
    `min_*` is a fraction to reach, so a new task kind's thresholds need no entry here."""
    return field.startswith("min_")


BROKEN_ABOVE = frozenset({"max_cer", "max_probability_change"})
"""Upper bounds whose values past `BROKEN_BEYOND` mean a broken behaviour."""


def reach_at_least(field: str) -> bool:
    """Whether a measured value must reach the threshold (a lower bound, or `require_equal_text`
    held as 1 / 0) rather than stay under it."""
    return lower_bound(field) or field == "require_equal_text"


BROKEN_BEYOND = 0.5
"""A recall, precision, agreement or IoU under 0.5, or a CER or probability change over 0.5, is a
broken build (measured: YOLOv8n w8a8 finds no object at all), not a spread: never proposed."""


def broken(field: str, value: float, what: str = "measured") -> str | None:
    """Why a task threshold at `value` would accept a broken behaviour (None if it would not).
    `value` is what was `measured` (or a `pinned` limit): never a value with headroom on it,
    which a person would read as measured."""
    too_low = lower_bound(field) and value < BROKEN_BEYOND
    too_high = field in BROKEN_ABOVE and value > BROKEN_BEYOND
    if too_low or too_high:
        bound = "floor" if too_low else "ceiling"
        return f"{what} {field} {value:.4g} is a broken behaviour, not a spread ({bound} {BROKEN_BEYOND:g})"
    return None


def looser(field: str, a: float, b: float) -> float:
    """The looser of two values of one threshold."""
    return min(a, b) if reach_at_least(field) else max(a, b)
