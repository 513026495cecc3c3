"""The backend interface: a public `run` that validates, and a `run_impl` hook that differs."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from baseline.errors import InputError
from baseline.models.intent import TargetSpec, ToolkitSettings
from baseline.models.lock import InputFeed, RknnMetadata
from baseline.models.results import Diagnostic

if TYPE_CHECKING:  # numpy is imported only when tensors are really handled
    from baseline.files.tensors import TensorSet
    from baseline.models.lock import OnnxPin


@dataclass(frozen=True)
class Capabilities:
    """What a backend does, declared once beside its registration."""

    converts: bool = False
    """Builds an `.rknn` with the toolkit on every run (the compilable and artifact gates judge it)."""
    uses_toolkit: bool = False
    """Runs RKNN-Toolkit2 in its pinned environment (so that environment is one of its inputs)."""
    needs_board: bool = False
    """Needs the physical board of its target's platform (one model at a time per board)."""
    reads_captures: bool = False
    """Reads outputs that a board captured into `<captures>/<model>/<target>/`."""
    runs_pinned_artifact: bool = False
    """Runs the `.rknn` pinned in the lock rather than a fresh conversion."""

    @property
    def per_target(self) -> bool:
        """Whether outputs depend on the target platform (everything but a host float run)."""
        return self.converts or self.needs_board or self.runs_pinned_artifact


@dataclass(frozen=True)
class BackendJob:
    """One unit of work: a model on a target (None for target-independent backends)."""

    model: str
    onnx_path: Path
    inputs: TensorSet
    """One array per graph input, sample axis first."""
    output_names: list[str]
    target: TargetSpec | None = None
    toolkit: ToolkitSettings | None = None
    fixed_shapes: bool = False
    """The ONNX inputs have symbolic dims: pass the fixtures' shapes to the converter."""
    artifact: Path | None = None
    """The locked `.rknn` for this target, for backends that run a shipped model."""
    fixtures_sha256: str | None = None
    capture_dir: Path | None = None
    """Where on-board captures for this model and target are collected."""
    feeds: list[InputFeed] | None = None
    """Inputs onnxruntime gets normalised / re-laid-out; the toolkit and boards get them as they are."""
    calibration: list[Path] | None = None
    """The calibration images of quantized builds (else the fixtures calibrate)."""
    cut: bool = False
    """`load_onnx(outputs=...)` cuts the graph: `output_names` are those tensors, not the graph's."""

    @property
    def target_name(self) -> str | None:
        return self.target.name if self.target is not None else None

    def feed(self, name: str) -> InputFeed | None:
        return next((feed for feed in self.feeds or [] if feed.input == name), None)


@dataclass(frozen=True)
class BoardInputs:
    """What backends that run the shipped model read beside the ONNX file and fixtures."""

    artifact: Path | None
    fixtures_sha256: str
    capture_dir: Path


def backend_job(
    model: str,
    onnx_path: Path,
    onnx: OnnxPin,
    inputs: TensorSet,
    target: TargetSpec | None,
    toolkit: ToolkitSettings,
    board: BoardInputs | None = None,
    *,
    targets: list[TargetSpec] | None = None,
    feeds: list[InputFeed] | None = None,
    calibration: list[Path] | None = None,
) -> BackendJob:
    """The one way `lock` and `verify` describe a backend run of a model on a target.

    `targets` are all the model's targets: a graph cut is model-wide, so the golden (which
    has no target) reads it from them."""
    cut = graph_outputs(targets or ([target] if target is not None else []))
    return BackendJob(
        model=model,
        onnx_path=onnx_path,
        inputs=inputs,
        output_names=cut if cut is not None else [spec.name for spec in onnx.outputs],
        target=target,
        toolkit=toolkit,
        fixed_shapes=not all(spec.is_static for spec in onnx.inputs),
        artifact=board.artifact if board is not None else None,
        fixtures_sha256=board.fixtures_sha256 if board is not None else None,
        capture_dir=board.capture_dir if board is not None else None,
        feeds=feeds,
        calibration=calibration,
        cut=cut is not None,
    )


def graph_outputs(targets: list[TargetSpec]) -> list[str] | None:
    """The `load_onnx(outputs=...)` cut of a model (model-wide: every target carries the same)."""
    for target in targets:
        outputs = target.conversion.load_onnx.get("outputs") if target.conversion is not None else None
        if isinstance(outputs, list) and outputs and all(isinstance(name, str) for name in outputs):
            return [str(name) for name in outputs]
    return None


@dataclass
class BuildReport:
    """How a conversion went: the verdict, where it stopped, what the toolkit said."""

    compiled: bool
    stage: str
    error: str | None
    diagnostics: list[Diagnostic]
    log_tail: list[str]
    seconds: dict[str, float]
    artifact: Path | None = None
    metadata: RknnMetadata | None = None
    crashed: bool = False
    """The toolkit process died or hung: the gate could not run, which is an `error`."""


@dataclass
class BackendRun:
    """What a backend produced; `outputs` is None when it produced none (`error` says why)."""

    outputs: TensorSet | None
    error: str | None = None
    build: BuildReport | None = None
    """Set by backends that convert the model first."""
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.outputs is not None


class Backend(ABC):
    """Runs a model on every fixture sample and returns outputs stacked on a sample axis."""

    name: ClassVar[str]

    capabilities: Capabilities = Capabilities()
    """What the registry declares for `name`; `baseline.backends.get_backend` sets it (a backend
    made directly, in a test, declares nothing: no board, no captures)."""

    def run(self, job: BackendJob) -> BackendRun:
        _check_samples(job)
        return self.run_impl(job)

    @abstractmethod
    def run_impl(self, job: BackendJob) -> BackendRun: ...


def _check_samples(job: BackendJob) -> None:
    counts = {name: array.shape[0] if array.ndim else 0 for name, array in job.inputs.items()}
    if len(set(counts.values())) > 1 or 0 in counts.values():
        raise InputError(
            f"model {job.model!r}: fixture inputs need one leading sample axis of equal length, got {counts}"
        )
