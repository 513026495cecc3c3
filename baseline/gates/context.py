"""What gates share during one verification: the lock, the project and cached backend runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from baseline.backends import BackendJob, BackendRun, get_backend
from baseline.cache import FileHashes
from baseline.errors import BaselineError
from baseline.models.lock import FilePin, Lock, ModelLock
from baseline.models.results import GateResult, LayerError, Status
from baseline.project import Project
from baseline.tensors import TensorSet, load_tensors


@dataclass(frozen=True)
class GateJob:
    """One check to run: a gate, and the backend and target it applies to (if any)."""

    gate: str
    backend: str | None = None
    target: str | None = None


def pending_result(model: ModelLock, gate: str, job: GateJob) -> GateResult:
    """A passing result for this job with no summary yet; gates fill it in with `model_copy`."""
    return GateResult(
        model=model.name, gate=gate, backend=job.backend, target=job.target, status=Status.PASS, summary=""
    )


@dataclass
class VerifyContext:
    """Runs each backend at most once per model and target, however many gates need it."""

    project: Project
    lock: Lock
    hashes: FileHashes = field(default_factory=FileHashes)
    """File hashes, remembered across runs when verify gives them a file."""
    _runs: dict[tuple[str, str, str | None], BackendRun] = field(default_factory=dict)
    _tensors: dict[str, TensorSet] = field(default_factory=dict)

    def tensors(self, pin: FilePin, where: str) -> TensorSet:
        """The arrays of a pinned `.npz`, read once."""
        if pin.path not in self._tensors:
            self._tensors[pin.path] = load_tensors(self.project.pinned(pin, where))
        return self._tensors[pin.path]

    def run(self, model: ModelLock, backend: str, target: str | None) -> BackendRun:
        key = (model.name, backend, target)
        if key not in self._runs:
            self._runs[key] = self._run_backend(model, backend, target)
        return self._runs[key]

    def job(self, model: ModelLock, target: str | None) -> BackendJob:
        return BackendJob(
            model=model.name,
            onnx_path=self.project.pinned(model.onnx, f"models.{model.name}.onnx"),
            inputs=self.tensors(model.fixtures, f"models.{model.name}.fixtures"),
            output_names=[spec.name for spec in model.onnx.outputs],
            target=model.target(target) if target is not None else None,
            toolkit=model.toolkit,
            fixed_shapes=not all(spec.is_static for spec in model.onnx.inputs),
            **self._board_inputs(model, target),
        )

    def _board_inputs(self, model: ModelLock, target: str | None) -> dict[str, Any]:
        """What backends that run the shipped model need: the pinned .rknn and the capture folder."""
        conversion = model.conversion(target) if target is not None else None
        if conversion is None:
            return {}
        where = f"models.{model.name}.conversions.{target}"
        captures = self.project.resolve(self.lock.captures, f"{self.project.lock_path}: captures")
        return {
            "artifact": self.project.pinned(conversion.artifact, where),
            "fixtures_sha256": model.fixtures.sha256,
            "capture_dir": captures / model.name / str(target),
        }

    def analyse(self, model: ModelLock, backend: str, target: str | None) -> list[LayerError]:
        """Per-layer accuracy analysis, for backends that offer one (else empty)."""
        runner = get_backend(backend)
        analyse = getattr(runner, "analyse", None)
        return analyse(self.job(model, target)) if analyse is not None else []

    def _run_backend(self, model: ModelLock, backend: str, target: str | None) -> BackendRun:
        try:
            return get_backend(backend).run(self.job(model, target))
        except BaselineError as error:
            return BackendRun(outputs=None, error=str(error))
