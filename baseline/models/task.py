"""What a model is *for*, as the intent file states it, and how golden and candidate compare at that level.

Whole-tensor numbers (cosine, element tolerances) cannot tell a detector that finds eight
objects instead of one from one that moved a box by a pixel. These records let a team say
"this output holds boxes in channels 0:4 and class scores in 4:84" and "judge it as a
YOLOv8 detector: recall and precision of the candidate's detections against the golden
ones at least 0.9". The library in `baseline.tasks` computes the results recorded here.

Axes are those of the model's own output, as the ONNX file declares it (the model's batch
dimension included, the fixture sample axis that baseline stacks in front not counted).
"""

from __future__ import annotations

import base64
import zlib
from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from baseline.models.base import Name, Record, RelPath
from baseline.models.labels import TaskLabels
from baseline.models.task_golden import (
    ClassificationGolden,
    CtcGolden,
    DetectionGolden,
    Fraction,
    SegmentationGolden,
)

MAX_DRAWN_BOXES = 100
"""Boxes per sample and side a result keeps for the pictures: enough for a scene, bounded for a report."""


class OutputPart(Record):
    """A named slice `start:stop` of one output along `axis`, e.g. YOLOv8's boxes = channels 0:4 on axis 1."""

    output: str
    name: Name
    axis: int = 1
    """Axis of the model's output (batch dim included, sample axis not); negative counts from the end."""
    start: int = Field(default=0, ge=0)
    stop: int | None = Field(default=None, ge=1)
    """Exclusive end; None means to the end of the axis."""
    per_channel: bool = False
    """Also judge every index along `axis` on its own (for example each class's scores):
    drift gets per-channel statistics, consistency per-channel agreement."""

    @property
    def key(self) -> str:
        """`"<output>:<part>"`: how the lock, the tolerances and the reports name this part."""
        return part_key(self.output, self.name)

    def channel_key(self, index: int) -> str:
        """`"<output>:<part>[<index>]"`, counted from the part's start: `scores[9]` is class 9."""
        return f"{self.key}[{index}]"

    @model_validator(mode="after")
    def _slice_is_not_empty(self) -> OutputPart:
        if self.stop is not None and self.stop <= self.start:
            raise ValueError(
                f"part {self.name!r}: stop ({self.stop}) must be greater than start ({self.start})"
            )
        return self


def part_key(output: str, part: str) -> str:
    return f"{output}:{part}"


def tolerance_key(name: str) -> str:
    """The tolerance entry that judges `name`: a part's channel `out:part[3]` is judged as `out:part`."""
    return name.rpartition("[")[0] if name.endswith("]") and ":" in name else name


def is_channel_key(name: str) -> bool:
    return tolerance_key(name) != name


Side = Annotated[int, Field(ge=1, le=8192)]
"""An input image side in pixels: anchors and grids grow with its square (an unbounded one ran the
decoder out of memory)."""


class ClassificationTask(Record):
    """Class scores per sample: the candidate must pick the same classes with similar probabilities."""

    kind: Literal["classification"] = "classification"
    output: str
    class_axis: int = -1
    top_k: int = Field(default=5, ge=1)
    """Clipped to the number of classes."""
    softmax: bool = False
    """True when the output holds logits: probabilities are compared after a softmax."""
    min_top1_agreement: Fraction = 1.0
    """Fraction of samples whose top-1 class must be the same."""
    min_topk_agreement: Fraction = 0.8
    """Mean overlap of the golden and candidate top-k sets (|intersection| / k)."""
    max_probability_change: float = Field(default=0.1, ge=0, le=1)
    """Largest allowed |candidate - golden| probability of any class in any sample."""
    class_names: list[str] = []
    golden: ClassificationGolden | None = None
    """Against onnxruntime, float builds: overrides of the thresholds above (see `task_golden`)."""
    golden_quantized: ClassificationGolden | None = None
    labels: TaskLabels | None = None
    """Ground truth for the fixture images: scored by the `labels` gate (see `baseline.models.labels`)."""

    @property
    def read(self) -> list[str]:
        """Every output this task reads."""
        return [self.output]


class DetectionTask(Record):
    """Boxes and classes: the candidate must find the same objects, in the same places, with the same classes.

    Heads (one image's output, after the model's batch dim):
    - `yolov8`: anchor-free, decoded, `[4 + C, A]` (or `[A, 4 + C]`): cx, cy, w, h then C class
      scores already through a sigmoid (Ultralytics export of YOLOv8 / YOLO11 with `nms=False`);
      with `extras`, rows after the scores that are not classes (a -seg head's 32 mask
      coefficients: `[4 + C + 32, A]`; a -pose head's keypoints: `[4 + C + 51, A]`).
    - `yolov5`: decoded `[A, 5 + C]`: cx, cy, w, h, objectness, C class probabilities (also YOLOv7).
    - `yolov10`: end-to-end `[K, 6]`: x1, y1, x2, y2, score, class; no NMS.
    Raw heads, several outputs (`outputs`, in the order the model gives them; `input_size` needed):
    - `yolov8-dfl`: the rknn_model_zoo export of YOLOv8 / YOLO11: per stride (8, 16, 32) a box
      branch `[4 * bins, h, w]` (distribution focal loss: `bins` per side), class scores
      `[C, h, w]` after the sigmoid, and optionally a score sum `[1, h, w]` (ignored).
    - `retinaface`: `loc [P, 4]`, `conf [P, 2]` (background, face; after the softmax) and
      optionally `landm [P, 10]` (ignored), against the prior boxes of min sizes (16, 32),
      (64, 128), (256, 512) at strides 8, 16, 32 and variances 0.1, 0.2; one class, 0 = face.
    """

    kind: Literal["detection"] = "detection"
    output: str
    """The (first) output read; with `outputs`, it defaults to the first of them."""
    head: Literal["yolov8", "yolov5", "yolov10", "yolov8-dfl", "retinaface"]
    outputs: list[str] | None = None
    """The outputs a raw head reads (`yolov8-dfl`, `retinaface`), in the model's order; for a
    decoded head (`yolov8`, `yolov5`, `yolov10`), the parts a graph cut made of its one output —
    the inputs of its last Concat, e.g. boxes and class scores — joined back before decoding.
    Unset (and absent from locks that predate raw heads) for one-output heads."""
    input_size: tuple[Side, Side] | None = None
    """The model's input `[height, width]` in pixels: strides and priors of raw heads follow from it."""
    extras: int | None = Field(default=None, ge=1, le=1000)
    """`yolov8` only: the last rows of the head are not class scores, e.g. 32 for a YOLOv8 /
    YOLO11 -seg head's mask coefficients, 51 for a -pose head's 17 keypoints (x, y, visibility).
    Its boxes and classes are judged; masks and keypoints are not decoded.
    Unset (and absent from locks written before it) for a head of boxes and scores only."""
    score_threshold: float = Field(default=0.25, gt=0, lt=1)
    score_margin: float = Field(default=0.05, ge=0, lt=1)
    """A detection missing on one side is excused when the other side scores it within this margin
    below the threshold: a box at 0.251 vs 0.249 is rounding, not a regression."""
    nms_iou: Fraction = 0.45
    match_iou: Fraction = 0.5
    """Golden and candidate boxes of the same class match when their IoU is at least this."""
    min_recall: Fraction = 0.9
    min_precision: Fraction = 0.9
    min_mean_iou: Fraction = 0.85
    """Mean IoU of matched boxes; catches boxes that still match but have moved."""
    max_class_flips: int = Field(default=0, ge=0)
    max_candidates: int = Field(default=3000, ge=1)
    """Highest-scoring boxes kept before NMS, which bounds its cost on noisy outputs."""
    class_names: list[str] = []
    golden: DetectionGolden | None = None
    """Against onnxruntime, float builds: overrides of the thresholds above (see `task_golden`)."""
    golden_quantized: DetectionGolden | None = None
    labels: TaskLabels | None = None
    """Ground truth for the fixture images: scored by the `labels` gate (see `baseline.models.labels`)."""

    @model_validator(mode="before")
    @classmethod
    def _output_from_outputs(cls, data: object) -> object:
        if isinstance(data, dict) and "output" not in data and data.get("outputs"):
            return {**data, "output": data["outputs"][0]}
        return data

    @model_validator(mode="after")
    def _raw_heads_name_their_outputs(self) -> DetectionTask:
        raw = self.head in RAW_HEADS
        if raw and (not self.outputs or self.input_size is None):
            raise ValueError(f"head {self.head!r} needs `outputs` (the branches, in order) and `input_size`")
        if not raw and self.outputs is not None and len(self.outputs) < 2:
            raise ValueError(
                f"head {self.head!r} reads one `output`, or with `outputs` the parts a graph cut made "
                "of it (the inputs of its last Concat: [boxes, scores]); name two or more"
            )
        if self.extras and self.head != "yolov8":
            raise ValueError(
                f"`extras` is for head 'yolov8' (a -seg head's mask coefficients), not {self.head!r}"
            )
        if self.head == "yolov8-dfl" and len(self.outputs or []) not in (6, 9):
            raise ValueError("head 'yolov8-dfl' reads 3 branches of 2 or 3 outputs each (6 or 9 `outputs`)")
        if self.head == "retinaface" and len(self.outputs or []) not in (2, 3):
            raise ValueError("head 'retinaface' reads `outputs` = [loc, conf] or [loc, conf, landm]")
        return self

    @property
    def read(self) -> list[str]:
        """Every output this task reads."""
        return self.outputs or [self.output]


RAW_HEADS = ("yolov8-dfl", "retinaface")


class SegmentationTask(Record):
    """Per-pixel classes: the candidate's label map must agree with the golden one.

    With several channels on `class_axis` the label is the argmax; with a single channel
    (a probability map such as DBNet's text map) it is `value > threshold`.
    """

    kind: Literal["segmentation"] = "segmentation"
    output: str
    class_axis: int = 1
    threshold: float | None = Field(default=None, allow_inf_nan=False)
    """For single-channel outputs: foreground where the value is above it (required then)."""
    min_pixel_agreement: Fraction = 0.99
    min_mean_iou: Fraction = 0.9
    """Mean IoU over the classes present in either label map of a sample."""
    class_names: list[str] = []
    golden: SegmentationGolden | None = None
    """Against onnxruntime, float builds: overrides of the thresholds above (see `task_golden`)."""
    golden_quantized: SegmentationGolden | None = None
    labels: TaskLabels | None = None
    """Ground truth for the fixture images: scored by the `labels` gate (see `baseline.models.labels`)."""

    @property
    def read(self) -> list[str]:
        """Every output this task reads."""
        return [self.output]


class CtcTask(Record):
    """CTC sequence output (OCR recognisers such as CRNN / PP-OCR rec): the decoded text must agree.

    Decoding is greedy: argmax per time step, repeats collapsed, blanks dropped.
    `alphabet` (or `alphabet_file`, one symbol per line) labels the non-blank classes in
    index order: with `blank = 0`, class `i` is `alphabet[i - 1]`. Without one, messages show
    class indices; comparison is always on class indices.
    """

    kind: Literal["ctc"] = "ctc"
    output: str
    class_axis: int = -1
    blank: int = Field(default=0, ge=0)
    alphabet: list[str] | None = None
    alphabet_file: RelPath | None = None
    space_char: bool = False
    """PaddleOCR's `use_space_char = True`: the class after the alphabet's last symbol is a space.
    PaddleOCR appends it to the dictionary file's lines (and puts the blank at index 0), so a
    model with `len(dictionary) + 2` classes needs this, or its last class shows as `⟨i⟩`."""
    max_cer: float = Field(default=0.02, ge=0, allow_inf_nan=False)
    """Largest character error rate (edit distance / golden length) of any sample."""
    require_equal_text: bool = True
    golden: CtcGolden | None = None
    """Against onnxruntime, float builds: overrides of the thresholds above (see `task_golden`)."""
    golden_quantized: CtcGolden | None = None
    labels: TaskLabels | None = None
    """Ground truth for the fixture images: scored by the `labels` gate (see `baseline.models.labels`)."""

    @property
    def read(self) -> list[str]:
        """Every output this task reads."""
        return [self.output]

    @model_validator(mode="after")
    def _one_alphabet_source(self) -> CtcTask:
        if self.alphabet is not None and self.alphabet_file is not None:
            raise ValueError("ctc: set alphabet or alphabet_file, not both")
        if self.space_char and self.alphabet is None and self.alphabet_file is None:
            raise ValueError("ctc: space_char extends an alphabet; set alphabet or alphabet_file too")
        return self

    def symbols(self, alphabet: list[str] | None) -> list[str] | None:
        """The non-blank classes' labels, in index order: `alphabet` (a loaded `alphabet_file`)
        or this task's own, then the space class when `space_char` is set."""
        labels = alphabet if alphabet is not None else self.alphabet
        if labels is None:
            return None
        return [*labels, " "] if self.space_char else labels


class EmbeddingGolden(Record):
    min_cosine: Fraction | None = None
    min_neighbour_agreement: Fraction | None = None


class EmbeddingTask(Record):
    """One vector per sample (face recognition, re-identification, image and text encoders): the
    candidate's vectors must point where the golden ones do, and each sample's nearest other
    sample, what a gallery search returns, must stay the same.

    The output's first dim is the model's batch (an output `[1, 512]` or `[1, 512, 1, 1]` is one
    512-dim vector per sample); the rest is flattened into the vector.
    """

    kind: Literal["embedding"] = "embedding"
    output: str
    min_cosine: Fraction = 0.99
    """Smallest cosine similarity of a sample's candidate vector with its golden one."""
    min_neighbour_agreement: Fraction = 1.0
    """Fraction of samples whose nearest other sample (by cosine) is the same on both sides;
    meaningful from three samples on."""
    neighbour_margin: float = Field(default=0.02, ge=0, le=2)
    """A changed neighbour is excused when, on the golden side, it was within this cosine of the
    nearest one: a near tie (unrelated vectors are all about equally far apart) is rounding."""
    golden: EmbeddingGolden | None = None
    """Against onnxruntime, float builds: overrides of the thresholds above (see `task_golden`)."""
    golden_quantized: EmbeddingGolden | None = None

    @property
    def read(self) -> list[str]:
        """Every output this task reads."""
        return [self.output]


TEAM_FUNCTION = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
"""`package.module:function`: a dotted module name of the project and a function in it."""
TeamFunction = Annotated[str, Field(pattern=TEAM_FUNCTION, max_length=256)]


class PostprocessTask(Record):
    """The team's own post-processing as the test: `postprocess` maps one sample's outputs to
    structured results, `compare` (optional) judges golden against candidate results.

    Both name a function in a module *of the project* (`package.module:function`, resolved
    from the project root; never an installed package, never a file outside the project).
    `postprocess(outputs: dict[str, np.ndarray]) -> JSON-able` is called once per fixture
    sample, with the model's own output shapes (batch dim included). `compare(golden,
    candidate)` returns a bool, `(passed, message)` or `(passed, message, {name: number})`;
    without it the results must be equal. The lock pins `sha256`, the hash of the module's
    package sources, every project module they import and the declared `data` files: editing
    any of them needs `baseline lock` and re-runs the gate.
    """

    kind: Literal["postprocess"] = "postprocess"
    postprocess: TeamFunction
    compare: TeamFunction | None = None
    outputs: list[str] = []
    """The outputs handed to `postprocess`; empty: all of them."""
    timeout: float = Field(default=60.0, gt=0, le=600)
    """Seconds one run of the team's code (every sample, golden and candidate) may take."""
    data: list[RelPath] = Field(default=[], max_length=64)
    """Project files the functions read (label maps, anchors, ...): pinned with the sources."""
    sha256: str | None = None
    """Written by `baseline lock`: the hash of the module's sources, the project modules they
    import and the `data` files (see `baseline.tasks.team`)."""

    @property
    def output(self) -> str:
        """How reports name what this task reads."""
        return ", ".join(self.outputs) if self.outputs else "all outputs"

    @property
    def read(self) -> list[str]:
        """The outputs named; empty: every output the model has."""
        return self.outputs


TaskSpec = Annotated[
    ClassificationTask | DetectionTask | SegmentationTask | CtcTask | EmbeddingTask | PostprocessTask,
    Field(discriminator="kind"),
]
"""One task-level comparison, chosen by `kind`."""


class TaskIntent(Record):
    """The structure and task of a model's outputs, as a `[models.task]` table would hold it."""

    parts: list[OutputPart] = []
    tasks: list[TaskSpec] = []

    @model_validator(mode="after")
    def _part_names_are_unique(self) -> TaskIntent:
        seen: set[tuple[str, str]] = set()
        for part in self.parts:
            key = (part.output, part.name)
            if key in seen:
                raise ValueError(f"parts: {part.name!r} is declared twice for output {part.output!r}")
            seen.add(key)
        return self


# ---------------------------------------------------------------- results


class SampleRef(Record):
    """Which fixture sample (and which image of the model's own batch, when it has one)."""

    sample: int
    batch: int | None = None

    @property
    def label(self) -> str:
        return f"sample {self.sample}" if self.batch is None else f"sample {self.sample}, batch {self.batch}"


class ClassificationSample(Record):
    where: SampleRef
    golden_top1: int
    candidate_top1: int
    golden_top1_probability: float
    candidate_top1_probability: float
    topk_overlap: float
    max_probability_change: float
    max_change_class: int
    max_change_golden_probability: float
    max_change_candidate_probability: float


class ClassificationComparison(Record):
    kind: Literal["classification"] = "classification"
    samples: list[ClassificationSample]
    top1_agreement: float
    topk_agreement: float
    max_probability_change: float


class ClassCount(Record):
    """Detections of one class in one sample."""

    class_id: int
    golden: int
    candidate: int
    matched: int
    missed: int
    """Golden detections of this class the candidate lacks (not excused; flips included)."""
    extra: int
    """Candidate detections of this class the golden lacks (not excused; flips included)."""
    mean_iou: float | None


class ClassFlip(Record):
    """A golden box found by the candidate at the same place (IoU >= match_iou) with another class."""

    golden_class: int
    candidate_class: int
    iou: float
    golden_score: float
    candidate_score: float


class Box(Record):
    """One final detection (x1, y1, x2, y2 in the model's own coordinates), kept for pictures."""

    x1: float
    y1: float
    x2: float
    y2: float
    score: float
    class_id: int


class DetectionSample(Record):
    where: SampleRef
    golden: int
    candidate: int
    matched: int
    excused_golden: int
    """Golden detections without a match that the candidate scores just under the threshold."""
    excused_candidate: int
    precision: float
    recall: float
    mean_iou: float | None
    """Mean IoU of matched pairs; None when nothing matched."""
    classes: list[ClassCount]
    class_flips: list[ClassFlip]
    golden_boxes: list[Box] = []
    """The golden's final detections, best first, at most `MAX_DRAWN_BOXES` (the reports draw them)."""
    candidate_boxes: list[Box] = []


class DetectionComparison(Record):
    kind: Literal["detection"] = "detection"
    samples: list[DetectionSample]
    precision: float
    """Pooled over samples: matched / counted candidate detections."""
    recall: float
    mean_iou: float | None
    class_flips: int


class ClassIoU(Record):
    class_id: int
    iou: float
    golden_pixels: int
    candidate_pixels: int


class LabelMap(Record):
    """One sample's per-pixel classes, kept for the report's pictures (never judged on): one byte a
    pixel (a class of 255 or more is stored as 255), row-major, zlib-compressed, base64; taken at
    every `stride`-th pixel of an output larger than `MAX_SIDE` a side."""

    MAX_SIDE: ClassVar[int] = 256

    height: int = Field(ge=1)
    width: int = Field(ge=1)
    stride: int = Field(default=1, ge=1)
    """Every `stride`-th row and column of the output's label map."""
    data: str

    def pixels(self) -> bytes:
        """The labels, `height * width` bytes, row by row."""
        raw = zlib.decompress(base64.b64decode(self.data))
        if len(raw) != self.height * self.width:
            raise ValueError(f"label map holds {len(raw)} bytes, not {self.height} x {self.width}")
        return raw


class SegmentationSample(Record):
    where: SampleRef
    pixel_agreement: float
    mean_iou: float
    classes: list[ClassIoU]
    golden_labels: LabelMap | None = None
    """The golden label map, kept for the samples that disagree most (see `compare_segmentation`)."""
    candidate_labels: LabelMap | None = None


class SegmentationComparison(Record):
    kind: Literal["segmentation"] = "segmentation"
    samples: list[SegmentationSample]
    pixel_agreement: float
    """Lowest over samples."""
    mean_iou: float
    """Lowest over samples."""


class CtcSample(Record):
    where: SampleRef
    golden_text: str
    candidate_text: str
    edit_distance: int
    cer: float


class CtcComparison(Record):
    kind: Literal["ctc"] = "ctc"
    samples: list[CtcSample]
    equal_texts: int
    max_cer: float
    mean_cer: float


class EmbeddingSample(Record):
    where: SampleRef
    cosine: float
    """Of the candidate's vector with the golden one (NaN where either is all zeros or not finite)."""
    golden_neighbour: int | None
    """Index, among the compared vectors, of the golden's nearest other vector (None alone)."""
    candidate_neighbour: int | None
    neighbour_gap: float = 0.0
    """How much nearer, on the golden side, the golden's neighbour is than the candidate's."""


class EmbeddingComparison(Record):
    kind: Literal["embedding"] = "embedding"
    samples: list[EmbeddingSample]
    min_cosine: float
    neighbour_agreement: float


class PostprocessSample(Record):
    """One sample judged by the team's code: its verdict, message, numbers and both results (as
    compact JSON, cut to `RESULT_CHARS` for the reports)."""

    where: SampleRef
    passed: bool
    message: str
    numbers: dict[str, float] = {}
    golden: str
    candidate: str


class PostprocessComparison(Record):
    kind: Literal["postprocess"] = "postprocess"
    function: str
    comparator: str
    samples: list[PostprocessSample]

    @property
    def failed(self) -> list[PostprocessSample]:
        return [sample for sample in self.samples if not sample.passed]


TaskComparison = Annotated[
    ClassificationComparison
    | DetectionComparison
    | SegmentationComparison
    | CtcComparison
    | EmbeddingComparison
    | PostprocessComparison,
    Field(discriminator="kind"),
]


class TaskOutcome(Record):
    """The verdict of one task comparison: `passed`, a one-line summary, one line per failure, the numbers."""

    kind: str
    output: str
    passed: bool
    summary: str
    failures: list[str] = []
    """Each names the sample, the class and the numbers against the threshold."""
    comparison: TaskComparison | None = None
    """None when no comparison could be made (for example the candidate's shape differs)."""

    def __bool__(self) -> bool:
        return self.passed
