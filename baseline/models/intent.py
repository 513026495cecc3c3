"""The intent file: what the user wants locked (models, targets, fixtures, tolerances).

It is written by hand and lives next to the generated lock, the way `pyproject.toml`
sits next to `uv.lock`. Paths are relative to the project root.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, model_validator

from baseline.models.base import Name, Record, RelPath
from baseline.models.task import OutputPart, TaskSpec
from baseline.models.tolerances import ToleranceSpec

MAX_SAMPLES = 256
DEFAULT_TOOLKIT_VERSION = "2.5.0"
"""The RKNN-Toolkit2 version a model gets when the intent names none."""


class ExporterSpec(Record):
    """How the ONNX file was produced; recorded as provenance, never executed."""

    script: RelPath | None = None
    command: str | None = None


class FixtureSpec(Record):
    """Where the reference inputs come from.

    Either `path` (a user `.npz` / `.npy`) or generated from `seed`: uniform in
    `[low, high)` for floats, integers in `[low, high)` for integer inputs.
    `shapes` fixes symbolic input dimensions (for example a dynamic batch).
    """

    path: RelPath | None = None
    seed: int = Field(default=0, ge=0)
    samples: int = Field(default=1, ge=1, le=MAX_SAMPLES)
    low: float = 0.0
    high: float = 1.0
    shapes: dict[str, list[Annotated[int, Field(ge=1)]]] = {}

    @model_validator(mode="after")
    def _range_is_not_empty(self) -> FixtureSpec:
        if self.high <= self.low:
            raise ValueError(f"fixtures.high ({self.high}) must be greater than low ({self.low})")
        return self


class QuantizationSpec(Record):
    """RKNN quantization settings (`rknn.config(quantized_*)`); the calibration set is the fixtures."""

    dtype: Literal["w8a8", "w8a16", "w16a16i", "w16a16i_dfp", "w4a16"] = "w8a8"
    algorithm: Literal["normal", "mmse", "kl_divergence", "gdq"] = "normal"
    method: Literal["channel", "layer"] = "channel"


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

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"name": value, "platform": value}
        if isinstance(value, dict) and "name" not in value and "platform" in value:
            return {**value, "name": value["platform"]}
        return value

    @property
    def quantized(self) -> bool:
        return self.quantization is not None


class ToolkitSettings(Record):
    """Which RKNN-Toolkit2 builds the models, and how its output is judged."""

    version: Annotated[str, StringConstraints(pattern=r"^\d+\.\d+\.\d+$")] = DEFAULT_TOOLKIT_VERSION
    timeout: float = Field(default=600.0, gt=0)
    """Seconds one conversion + simulation may take before it is killed and reported."""
    onnx_timeout: float = Field(default=300.0, gt=0)
    """Seconds the ONNX checks of one model may take: the static gate's analysis, and the
    onnxruntime golden run over every fixture sample. A graph can loop for ever (a Loop with
    a huge trip count): past this it is killed and the gate reports `error`."""
    unknown_errors: Literal["warn", "fail"] = "warn"
    """Whether an `E` log line that matches no known pattern fails the compilable gate."""


class ExpectedFailure(Record):
    """A gate known to fail for this model, with the reason; it is reported as `xfail`."""

    gate: Name
    reason: Annotated[str, StringConstraints(min_length=1)]
    target: Name | None = None

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
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"{what} must be unique, repeated: {', '.join(duplicates)}")
