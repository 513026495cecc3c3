"""The intent file: what the user wants locked (models, targets, fixtures, tolerances).

It is written by hand and lives next to the generated lock, the way `pyproject.toml`
sits next to `uv.lock`. Paths are relative to the project root.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Annotated, Any, Literal

from pydantic import Field, JsonValue, StringConstraints, model_validator

from baseline.models.base import Name, Record, RelPath
from baseline.models.task import OutputPart, TaskSpec
from baseline.models.tolerances import ToleranceSpec

FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]

MAX_SAMPLES = 256
DEFAULT_TOOLKIT_VERSION = "2.5.0"
"""The RKNN-Toolkit2 version a model gets when the intent names none."""


class ExporterSpec(Record):
    """How the ONNX file was produced; recorded as provenance, never executed."""

    script: RelPath | None = None
    command: str | None = None


MAX_IMAGES = 500
"""Images one fixture or calibration set may name (the zoo calibrates on 20, teams on a few hundred)."""


class ImageSet(Record):
    """JPEG/PNG files and how they become what the board receives (uint8 NHWC pixels).

    `path` is a folder, a glob (`images/*.jpg`), a `dataset.txt` (one file per line,
    relative to the text file, the toolkit's own format) or one JPEG/PNG file (a set of one).
    Files are taken in sorted order.
    """

    path: RelPath
    input: str | None = None
    """The graph input the pixels feed; the model's only input when unset."""
    resize: Literal["resize", "letterbox"] = "resize"
    """`resize` stretches to the input size; `letterbox` keeps the aspect ratio and pads
    bottom-right (the zoo's YOLO board code pads centred; see docs/toolkit.md)."""
    pad: int = Field(default=114, ge=0, le=255)
    """The pad value of a letterbox, per channel."""
    channels: Literal["RGB", "BGR"] = "RGB"
    """Channel order of the pixels fed to the board (and, normalised, to onnxruntime)."""
    samples: int | None = Field(default=None, ge=1, le=MAX_IMAGES)
    """Use only the first N files."""


class CalibrationSpec(Record):
    """The calibration set of quantized builds (`build(dataset=...)`), separate from the fixtures.

    The files go to the toolkit as they are, listed in a `dataset.txt`, as the zoo's
    `convert.py` scripts pass them (the toolkit reads and resizes them itself); for an image
    input the graph lays out NHWC, decoded to its size first. Images calibrate a model of one
    input only (the toolkit wants every input on each line); a model of several calibrates on
    its fixtures.
    """

    path: RelPath
    samples: int | None = Field(default=None, ge=1, le=MAX_IMAGES)


class FixtureSpec(Record):
    """Where the reference inputs come from.

    Either `path` (a user `.npz` / `.npy`), `images` (JPEG/PNG pixels, stored as uint8 NHWC),
    or generated from `seed`: uniform in `[low, high)` for floats, integers in `[low, high)`
    for integer inputs, or in an input's own range from `ranges`. `shapes` fixes symbolic input
    dimensions (for example a dynamic batch).
    """

    path: RelPath | None = None
    images: ImageSet | None = None
    seed: int = Field(default=0, ge=0)
    samples: int = Field(default=1, ge=1, le=MAX_SAMPLES)
    low: float = Field(default=0.0, allow_inf_nan=False)
    high: float = Field(default=1.0, allow_inf_nan=False)
    shapes: dict[str, list[Annotated[int, Field(ge=1)]]] = {}
    ranges: dict[str, tuple[FiniteFloat, FiniteFloat]] = {}
    """Per input, `[low, high)` in place of `low` / `high`: a text encoder's token ids below its
    vocabulary beside an attention mask of ones (`{ input_ids = [0, 30522], attention_mask = [1, 2] }`)."""

    @model_validator(mode="after")
    def _range_is_not_empty(self) -> FixtureSpec:
        if self.high <= self.low:
            raise ValueError(f"fixtures.high ({self.high}) must be greater than low ({self.low})")
        for name, (low, high) in self.ranges.items():
            if high <= low:
                raise ValueError(f"fixtures.ranges.{name}: high ({high}) must be greater than low ({low})")
        if self.path is not None and self.images is not None:
            raise ValueError("fixtures.path and fixtures.images are exclusive; keep one")
        return self


MAX_FLOAT_LAYERS = 256
LayerName = Annotated[str, StringConstraints(min_length=1, max_length=512, pattern=r"^[^\s]+$")]


class QuantizationSpec(Record):
    """RKNN quantization settings (`rknn.config(quantized_*)`); the calibration set is the fixtures."""

    dtype: Literal["w8a8", "w8a16", "w16a16i", "w16a16i_dfp", "w4a16"] = "w8a8"
    algorithm: Literal["normal", "mmse", "kl_divergence", "gdq"] = "normal"
    method: Literal["channel", "layer"] = "channel"
    float_layers: list[LayerName] | None = Field(default=None, min_length=1, max_length=MAX_FLOAT_LAYERS)
    """Hybrid quantization (the toolkit's `hybrid_quantization_step1/2`): tensors of the ONNX graph
    kept in float16 (int16 on rv1103 / rv1106, which refuse float16 layers), with the names the
    toolkit derives from them (`name-rs`, `name_rs`, ...).
    `baseline explore` proposes them: e.g. a YOLO output whose boxes and class scores share one
    int8 scale. The rest of the build keeps the target's dtype."""


MAX_SETTINGS_BYTES = 1 << 16
"""A conversion table is small: op_target maps, mean/std, a few shapes. Refuse more than 64 KiB."""

DERIVED_SETTINGS = {
    "config": {
        "target_platform": "it is the target's `platform`",
        "quantized_dtype": "set the target's `quantization = {dtype = ...}`",
        "quantized_algorithm": "set the target's `quantization = {algorithm = ...}`",
        "quantized_method": "set the target's `quantization = {method = ...}`",
    },
    "load_onnx": {"model": "it is the model's `onnx`"},
    "build": {
        "do_quantization": "a target with `quantization` is quantized, one without is not",
        "dataset": "set the model's `calibration` (or the fixtures calibrate)",
    },
}
"""Arguments baseline derives from the rest of the intent, and where to set them instead."""

MODEL_WIDE = {"config": ("mean_values", "std_values"), "load_onnx": ("inputs", "input_size_list", "outputs")}
"""Settings that decide what onnxruntime (the golden, one per model) is fed and returns:
a target cannot override them."""

SETTING_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
"""A toolkit argument's name: a Python identifier in ASCII. Uppercase is allowed because the
toolkit's own names use it (`rknn.config(quant_img_RGB2BGR=...)`)."""

Settings = dict[Annotated[str, StringConstraints(pattern=SETTING_NAME, max_length=64)], JsonValue]


class ConversionSpec(Record):
    """Keyword arguments of the toolkit calls, named as the pinned toolkit version names them.

    `config` → `rknn.config(...)`, `load_onnx` → `rknn.load_onnx(...)`, `build` →
    `rknn.build(...)`. Which keys exist is read from the installed toolkit's signatures, so
    a key that version does not accept is an error before any conversion runs.
    """

    config: Settings = {}
    load_onnx: Settings = {}
    build: Settings = {}

    @model_validator(mode="after")
    def _no_derived_settings(self) -> ConversionSpec:
        for call, derived in DERIVED_SETTINGS.items():
            for key in getattr(self, call):
                if key in derived:
                    raise ValueError(f"conversion.{call}.{key} is set by baseline: {derived[key]}")
        size = len(json.dumps(self.model_dump(mode="json")))
        if size > MAX_SETTINGS_BYTES:
            raise ValueError(f"conversion settings take {size} bytes, above {MAX_SETTINGS_BYTES}")
        return self

    def calls(self) -> dict[str, dict[str, JsonValue]]:
        return {"config": self.config, "load_onnx": self.load_onnx, "build": self.build}

    def over(self, base: ConversionSpec | None) -> ConversionSpec:
        """These settings on top of `base`, key by key (a target over its model's)."""
        if base is None:
            return self
        return ConversionSpec(
            config={**base.config, **self.config},
            load_onnx={**base.load_onnx, **self.load_onnx},
            build={**base.build, **self.build},
        )


Version = Annotated[str, StringConstraints(pattern=r"^\d+\.\d+\.\d+([a-z]+\d*)?$")]


class BoardSpec(Record):
    """The board software a target is meant to run on, as the team declares it."""

    serial: str | None = None
    """adb serial of a board attached to this host, for the `rknn-device` backend."""
    runtime: Version | None = None
    """librknnrt (or librknnmrt on RV110x) version."""
    driver: Version | None = None
    rknn_server: Version | None = None


class TargetSpec(Record):
    """A build target: a platform, optionally quantized. A bare string `"rk3588"` is fp16."""

    name: Name
    platform: Name
    quantization: QuantizationSpec | None = None
    board: BoardSpec | None = None
    conversion: ConversionSpec | None = None
    """Toolkit arguments for this target, on top of the model's (in the lock: the merged result)."""

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"name": value, "platform": value}
        if isinstance(value, dict) and "name" not in value and "platform" in value:
            return {**value, "name": value["platform"]}
        return value

    @model_validator(mode="after")
    def _buildable(self) -> TargetSpec:
        if self.quantization is None and self.platform in QUANTIZED_ONLY_PLATFORMS:
            raise ValueError(
                f"{self.platform} builds int8 only (RKNN-Toolkit2 refuses an fp16 build for it): write the "
                f'target as {{ name = "{self.platform}-w8a8", platform = "{self.platform}", '
                'quantization = { dtype = "w8a8" } }'
            )
        return self

    @property
    def quantized(self) -> bool:
        return self.quantization is not None


QUANTIZED_ONLY_PLATFORMS = frozenset({"rv1103", "rv1103b", "rv1106", "rv1106b"})
"""Platforms whose builds are quantized only: RKNN-Toolkit2 2.2.0, 2.3.2 and 2.5.0 each refuse
`build(do_quantization=False)` for them ("Current target_platform(rv1106) not support
do_quantization = False!", measured on the demo classifier; rk3562, rk3576, rk2118 and rv1126b
build fp16). A bare `"rv1106"` target reached the toolkit, which failed its build."""


class ToolkitSettings(Record):
    """Which RKNN-Toolkit2 builds the models, and how its output is judged."""

    version: Annotated[str, StringConstraints(pattern=r"^\d+\.\d+\.\d+$")] = DEFAULT_TOOLKIT_VERSION
    timeout: float = Field(default=600.0, gt=0, allow_inf_nan=False)
    """Seconds one conversion + simulation may take before it is killed and reported."""
    onnx_timeout: float = Field(default=300.0, gt=0, allow_inf_nan=False)
    """Seconds the ONNX checks of one model may take: the static gate's analysis, and the
    onnxruntime golden run over every fixture sample. A graph can loop for ever (a Loop with
    a huge trip count): past this it is killed and the gate reports `error`."""
    unknown_errors: Literal["warn", "fail"] = "warn"
    """Whether an `E` log line that matches no known pattern fails the compilable gate."""


GATE_NAMES = (
    "integrity",
    "static",
    "compat",
    "compilable",
    "artifact",
    "consistency",
    "task",
    "labels",
    "drift",
)
"""The gates' names in running order, for checking an intent's `expect_fail` without importing the
gates (they sit above the intent); `baseline.gates.GATES` is tested to name exactly these."""


class ExpectedFailure(Record):
    """A gate known to fail for this model, with the reason; it is reported as `xfail`."""

    gate: Name
    reason: Annotated[str, StringConstraints(min_length=1)]
    target: Name | None = None
    against: Literal["onnxruntime"] | None = None
    """`onnxruntime`: only the comparison with onnxruntime is expected to fail (an int8 build known
    to be inaccurate); the task gate still judges the build against its own locked outputs, so a
    regression of that build stays visible. None: the gate as a whole."""

    @model_validator(mode="after")
    def _against_needs_a_reference_gate(self) -> ExpectedFailure:
        if self.against is not None and self.gate not in ("task", "consistency"):
            raise ValueError(f"against = {self.against!r} applies to the task and consistency gates only")
        return self

    def covers(self, gate: str, target: str | None) -> bool:
        """The one matching rule: the same gate, and this entry's target or every target."""
        return self.gate == gate and (self.target is None or self.target == target)


def expected_failure(
    expectations: list[ExpectedFailure], gate: str, target: str | None
) -> ExpectedFailure | None:
    """The first expectation that covers `gate` on `target`, if any."""
    return next((e for e in expectations if e.covers(gate, target)), None)


class ModelDefaults(Record):
    """Settings shared by every model unless the model overrides them."""

    targets: list[TargetSpec] = [TargetSpec(name="rk3588", platform="rk3588")]
    backends: list[Name] = ["onnxruntime", "rknn-sim"]
    toolkit: ToolkitSettings = ToolkitSettings()
    fixtures: FixtureSpec = FixtureSpec()
    tolerances: ToleranceSpec = ToleranceSpec()
    conversion: ConversionSpec | None = None
    calibration: CalibrationSpec | None = None


class ModelIntent(Record):
    """One model as the user declares it; unset fields fall back to `[defaults]`."""

    name: Name
    onnx: RelPath
    exporter: ExporterSpec = ExporterSpec()
    targets: list[TargetSpec] | None = None
    backends: list[Name] | None = None
    fixtures: FixtureSpec | None = None
    tolerances: ToleranceSpec | None = None
    toolkit: ToolkitSettings | None = None
    conversion: ConversionSpec | None = None
    """Toolkit arguments for every target of this model (mean/std, graph cuts, ...)."""
    calibration: CalibrationSpec | None = None
    """Images the quantized targets calibrate on; without it, the fixtures calibrate."""
    expect_fail: list[ExpectedFailure] = []
    parts: list[OutputPart] = []
    """Named slices of outputs (boxes = channels 0:4): statistics and comparisons per part."""
    tasks: list[TaskSpec] = []
    """What the model is for (classification, detection, segmentation, CTC): the task gate
    compares decoded results, not only tensors."""


class ProjectSettings(Record):
    """Project-wide settings."""

    tensors: RelPath | None = None
    """Directory for generated fixture and reference tensors (default: `<lock dir>/tensors`)."""
    captures: RelPath = "captures"
    """Where on-board captures are collected: `<captures>/<model>/<target>/`."""


class Intent(Record):
    """The whole intent file."""

    project: ProjectSettings = ProjectSettings()
    defaults: ModelDefaults = ModelDefaults()
    models: list[ModelIntent] = Field(min_length=1)

    @model_validator(mode="after")
    def _names_are_unique(self) -> Intent:
        _require_unique("model names", [model.name for model in self.models])
        for model in self.models:
            targets = model.targets if model.targets is not None else self.defaults.targets
            _require_unique(f"target names of model {model.name!r}", [t.name for t in targets])
        return self


def _require_unique(what: str, names: list[str]) -> None:
    # `Counter`, not `list.count` per name: that is quadratic in a 1,000-model intent
    duplicates = sorted(name for name, seen in Counter(names).items() if seen > 1)
    if duplicates:
        raise ValueError(f"{what} must be unique, repeated: {', '.join(duplicates)}")
