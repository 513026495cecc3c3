"""The gate contract: what a gate is, what it declares it reads, and the only door to those reads.

A gate is a module (or any object) with a `NAME`, `jobs(model)`, `reads(model, job)` and
`check(job, inputs)`. `reads` declares, per check, the pinned files, backend runs and lock-wide
sections the check opens; verify builds each job's cache key from those declarations, and
`GateInputs` hands the check exactly those and nothing else. A gate that opens something it did
not declare raises `UndeclaredInput` — in every test that runs it — instead of silently reusing
a stale cached result.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from baseline.models.base import replaced
from baseline.models.lock import FilePin, MatrixCell, ModelLock, ObservedBoard, ToolkitPin
from baseline.models.results import GateMetrics, GateResult, LayerError, Status

if TYPE_CHECKING:  # numpy and the toolkit client: only when a check really runs
    from baseline.backends import BackendRun
    from baseline.files.tensors import TensorSet
    from baseline.gates.context import VerifyContext
    from baseline.models.tensors import TensorStats
    from baseline.toolchain.provision import Toolchain

LockSection = Literal["boards", "toolkits", "matrix"]
"""Lock-wide parts a check may read besides its model's own entry."""


@dataclass(frozen=True)
class GateJob:
    """One check to run: a gate, and the backend and target it applies to (if any)."""

    gate: str
    backend: str | None = None
    target: str | None = None


@dataclass(frozen=True)
class Reads:
    """What one check reads. Its model's lock entry, narrowed to the check's target, is always
    read (see `model_view`); everything else must be named here."""

    files: frozenset[str] = frozenset()
    """Lock keys of pinned files, as `pinned_files` names them: `onnx`, `fixtures`,
    `references.onnxruntime.host`, `conversions.rk3588.artifact`, ..."""
    runs: frozenset[tuple[str, str | None]] = frozenset()
    """Backend runs, as (backend, target); a run's own inputs follow from its capabilities."""
    lock: frozenset[LockSection] = frozenset()
    toolkit_environment: bool = False
    """The installed toolkit environment of the model's pinned version (its package versions)."""

    def __or__(self, other: Reads) -> Reads:
        return Reads(
            self.files | other.files,
            self.runs | other.runs,
            self.lock | other.lock,
            self.toolkit_environment or other.toolkit_environment,
        )

    @staticmethod
    def union(reads: Iterable[Reads]) -> Reads:
        total = Reads()
        for one in reads:
            total = total | one
        return total


class Gate(Protocol):
    """What every gate module provides; `GATES` in `baseline.gates` lists them in running order."""

    @property
    def NAME(self) -> str: ...

    def jobs(self, model: ModelLock) -> list[GateJob]:
        """The checks this gate runs for a model: one per backend and target it applies to."""
        ...

    def reads(self, model: ModelLock, job: GateJob) -> Reads:
        """What `check` will open for this job; `model` is the job's view of the lock entry."""
        ...

    def check(self, job: GateJob, inputs: GateInputs) -> GateResult:
        """Judge one job. A failed gate is a result; a `BaselineError` means it could not run."""
        ...


class UndeclaredInput(RuntimeError):
    """A gate opened something its `reads` did not declare: a bug in the gate, never bad input."""


def model_view(model: ModelLock, backend: str | None, target: str | None) -> ModelLock:
    """The part of a model's lock entry a check reads: a target-free, backend-free check (the
    integrity check) reads it all; the others read their own target's settings, conversion and
    references, and the target-free golden."""
    if backend is None and target is None:
        return model
    return replaced(
        model,
        targets=[t for t in model.targets if t.name == target],
        conversions=[c for c in model.conversions if c.target == target],
        references=[r for r in model.references if r.target in (None, target)],
    )


def pinned_files(model: ModelLock) -> dict[str, FilePin]:
    """Every file the lock pins for a model, under the key `Reads.files` uses."""
    files: dict[str, FilePin] = {"onnx": model.onnx, "fixtures": model.fixtures}
    files |= onnx_files(model)
    if model.fixtures.source is not None:
        files["fixtures.source"] = model.fixtures.source
    if model.exporter.script is not None:
        files["exporter.script"] = model.exporter.script
    if model.fixtures.images is not None:
        files |= {f"fixtures.images.{i}": pin for i, pin in enumerate(model.fixtures.images.files)}
    files |= calibration_files(model)
    files |= label_files(model)
    files |= {f"conversions.{pin.target}.artifact": pin.artifact for pin in model.conversions}
    files |= {f"references.{ref.backend}.{ref.target or 'host'}": ref.tensors for ref in model.references}
    return files


def onnx_files(model: ModelLock) -> dict[str, FilePin]:
    """The model's external data files, keyed `onnx.external.<n>`: whatever runs the model reads them."""
    return {f"onnx.external.{i}": pin for i, pin in enumerate(model.onnx.external or [])}


def label_files(model: ModelLock) -> dict[str, FilePin]:
    """The label files of labelled tasks, keyed `tasks.<n>.labels`, as the lock pins them."""
    files = {}
    for index, task in enumerate(model.tasks):
        labels = getattr(task, "labels", None)
        if labels is not None and labels.sha256 is not None and labels.size is not None:
            files[label_key(index)] = FilePin(path=labels.path, sha256=labels.sha256, size=labels.size)
    return files


def label_key(task: int) -> str:
    return f"tasks.{task}.labels"


def calibration_files(model: ModelLock) -> dict[str, FilePin]:
    """The calibration images, keyed `calibration.<n>`: a quantized conversion reads them all."""
    pins = model.calibration.files if model.calibration is not None else []
    return {f"calibration.{i}": pin for i, pin in enumerate(pins)}


def matrix_cells(cells: list[MatrixCell], model: str, target: str | None) -> list[MatrixCell]:
    return [c for c in cells if c.model == model and (target is None or c.target == target)]


def reference_key(backend: str, target: str | None) -> str:
    """The `pinned_files` key of a backend's locked outputs."""
    return f"references.{backend}.{target or 'host'}"


@dataclass
class GateInputs:
    """The door between one check and the verification: only what the check declared opens
    (the context stays private: a check that reached around its declarations would read what
    the cache key does not cover)."""

    _ctx: VerifyContext
    model: ModelLock
    """The check's view of its model's lock entry (`model_view`)."""
    job: GateJob
    declared: Reads
    _files: dict[str, FilePin] = field(init=False)

    def __post_init__(self) -> None:
        self._files = pinned_files(self.model)

    def path(self, key: str) -> Path:
        """The pinned file under lock key `key`, resolved inside the project."""
        pin = self._pin(key)
        return self._ctx.project.pinned(pin, f"models.{self.model.name}.{key}")

    def sha256(self, key: str) -> str:
        """Its hash, or `cache.size_mismatch(...)` without reading it if its size is not the pin's."""
        return self._ctx.hashes.sha256(self.path(key), self._pin(key).size)

    def tensors(self, key: str) -> TensorSet:
        """The arrays of the pinned `.npz` under `key`, read once per verification."""
        return self._ctx.tensors(self._pin(key), f"models.{self.model.name}.{key}")

    def run(self, backend: str, target: str | None) -> BackendRun:
        self._require((backend, target) in self.declared.runs, f"the {backend} run on {target or 'host'}")
        return self._ctx.run(self.model_entry, backend, target)

    def output_stats(self, backend: str, target: str | None) -> list[TensorStats]:
        """Statistics of a declared run's outputs and parts (`VerifyContext.output_stats`)."""
        self._require((backend, target) in self.declared.runs, f"the {backend} run on {target or 'host'}")
        return self._ctx.output_stats(self.model_entry, backend, target)

    def analyse(self, backend: str, target: str | None) -> list[LayerError]:
        """The toolkit's per-layer accuracy analysis of a declared run (empty where none exists)."""
        self._require((backend, target) in self.declared.runs, f"the {backend} run on {target or 'host'}")
        return self._ctx.analyse(self.model_entry, backend, target)

    def boards(self) -> list[ObservedBoard]:
        self._require("boards" in self.declared.lock, "the lock's boards")
        return self._ctx.lock.boards

    def toolkits(self) -> list[ToolkitPin]:
        self._require("toolkits" in self.declared.lock, "the lock's toolkits")
        return self._ctx.lock.toolkits

    def matrix(self) -> list[MatrixCell]:
        """The recorded `baseline matrix` cells of this model (on this job's target, if it has one)."""
        self._require("matrix" in self.declared.lock, "the lock's matrix")
        return matrix_cells(self._ctx.lock.matrix, self.model.name, self.job.target)

    def toolchain(self) -> Toolchain | None:
        """The installed environment of the model's toolkit version, if there is one."""
        from baseline.toolchain.provision import find_toolchain

        self._require(self.declared.toolkit_environment, "the toolkit environment")
        return find_toolchain(self.model.toolkit.version)

    @property
    def project_root(self) -> Path:
        """The project's folder: where a team's post-processing module is imported from (its
        sources are pinned by hash in the task's spec, so the key covers them)."""
        return self._ctx.project.root

    @property
    def model_entry(self) -> ModelLock:
        """The whole lock entry, for backends: a run reads what its capabilities say, which
        the cache key covers through the declared run."""
        entry = self._ctx.lock.model(self.model.name)
        assert entry is not None
        return entry

    def result(
        self,
        metrics: GateMetrics | None = None,
        *,
        status: Status = Status.PASS,
        summary: str = "",
        details: list[str] | None = None,
        hint: str | None = None,
    ) -> GateResult:
        """This job's result (a pass unless `status` says otherwise)."""
        return GateResult(
            model=self.model.name,
            gate=self.job.gate,
            backend=self.job.backend,
            target=self.job.target,
            status=status,
            summary=summary,
            metrics=metrics,
            details=details or [],
            hint=hint,
        )

    def failed(
        self, summary: str, *, details: list[str], hint: str | None, metrics: GateMetrics | None = None
    ) -> GateResult:
        return self.result(metrics, status=Status.FAIL, summary=summary, details=details, hint=hint)

    def skipped(self, summary: str) -> GateResult:
        return self.result(status=Status.SKIP, summary=summary)

    def errored(self, summary: str, metrics: GateMetrics | None = None) -> GateResult:
        """The check could not judge (a run without outputs, a toolkit that crashed)."""
        return self.result(metrics, status=Status.ERROR, summary=summary)

    def _pin(self, key: str) -> FilePin:
        self._require(key in self.declared.files, f"the pinned file {key!r}")
        pin = self._files.get(key)
        if pin is None:
            raise UndeclaredInput(f"model {self.model.name!r} pins no file {key!r} in this job's view")
        return pin

    def _require(self, declared: bool, what: str) -> None:
        if not declared:
            raise UndeclaredInput(
                f"gate {self.job.gate!r} read {what} without declaring it in reads(); "
                "add it there so the cache key covers it"
            )


def judgeable_outputs(inputs: GateInputs, backend: str, target: str | None) -> TensorSet | GateResult:
    """A declared run's outputs, or the verdict when an output-comparing gate cannot judge it:
    a build that failed is the compilable gate's report (skip); a run with no outputs could not
    be checked (error)."""
    run = inputs.run(backend, target)
    if run.build is not None and not run.build.compiled:
        return inputs.skipped(NOT_BUILT)
    if run.outputs is None:
        return inputs.errored(f"no outputs: {run.error}")
    return run.outputs


NOT_BUILT = "not built; see compilable"
