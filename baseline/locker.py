"""`baseline lock`: turn the intent into a lock by measuring everything it names.

Everything is computed in memory first; files are written only once every model
succeeded, tensors before the lock, so a failure never leaves a lock pointing at
tensors it did not produce.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

from baseline import __version__
from baseline.backends import GOLDEN, BackendJob, get_backend, is_per_target
from baseline.compare import tensor_stats
from baseline.errors import InputError
from baseline.hashing import sha256_bytes, sha256_file
from baseline.intent import (
    ResolvedModel,
    intent_hash,
    load_intent,
    output_tolerances,
    resolve_models,
)
from baseline.lockfile import load_lock, write_lock
from baseline.models.intent import Intent
from baseline.models.lock import (
    AuditEntry,
    ExporterPin,
    FilePin,
    FixturePin,
    HostToolchain,
    Lock,
    ModelLock,
    OnnxPin,
    ReferencePin,
)
from baseline.onnx_facts import (
    graph_inputs,
    load_onnx_structure,
    opset_imports,
    producer,
    tensor_specs,
)
from baseline.project import Project
from baseline.provenance import exporter_pin
from baseline.tensors import TensorSet, fixtures_from_file, generate_fixtures, npz_bytes, save_npz


@dataclass
class PendingTensors:
    """Tensor files to write once the whole lock is known: path → arrays."""

    files: dict[Path, TensorSet] = field(default_factory=dict)

    def pin(self, project: Project, path: Path, arrays: TensorSet) -> FilePin:
        data = npz_bytes(arrays)
        self.files[path] = arrays
        return FilePin(path=project.relative(path), sha256=sha256_bytes(data), size=len(data))

    def write(self) -> None:
        for path, arrays in self.files.items():
            save_npz(path, arrays)


@dataclass
class LockOutcome:
    lock: Lock
    changed: bool


def lock_project(project: Project) -> LockOutcome:
    """Build the lock for every model in the intent and write it (only if it changed)."""
    intent = load_intent(project.intent_path)
    pending = PendingTensors()
    tensor_dir = _tensor_dir(project, intent)
    models = [
        lock_model(project, model, tensor_dir / model.name, pending)
        for model in resolve_models(intent)
    ]
    lock = Lock(
        inputs_hash=intent_hash(intent),
        toolchain=host_toolchain(),
        models=models,
        audit=_previous_audit(project.lock_path),
    )
    pending.write()
    return LockOutcome(lock=lock, changed=write_lock(project.lock_path, lock))


def _tensor_dir(project: Project, intent: Intent) -> Path:
    if intent.project.tensors is None:
        return project.default_tensor_dir()
    return project.resolve(intent.project.tensors, f"{project.intent_path}: project.tensors")


def _previous_audit(lock_path: Path) -> list[AuditEntry]:
    """Accepted changes survive a relock; an unreadable old lock is simply replaced."""
    if not lock_path.is_file():
        return []
    try:
        return load_lock(lock_path).audit
    except Exception:
        return []


def lock_model(
    project: Project, model: ResolvedModel, tensor_dir: Path, pending: PendingTensors
) -> ModelLock:
    where = f"{project.intent_path}: models.{model.name}"
    onnx_path = project.resolve(model.onnx, f"{where}.onnx")
    onnx_pin = pin_onnx(project, onnx_path)
    fixtures, fixture_pin = _fixtures(project, model, onnx_pin, tensor_dir, pending, where)
    references = [
        _reference(project, model, onnx_path, fixtures, backend, target, tensor_dir, pending)
        for backend in model.backends
        for target in (model.targets if is_per_target(backend) else [None])
    ]
    return ModelLock(
        name=model.name,
        targets=model.targets,
        backends=model.backends,
        onnx=onnx_pin,
        exporter=_exporter(project, model, where),
        fixtures=fixture_pin,
        references=references,
        tolerances=output_tolerances(model.tolerances, [spec.name for spec in onnx_pin.outputs]),
        expect_fail=model.expect_fail,
    )


def pin_file(project: Project, path: Path) -> FilePin:
    return FilePin(path=project.relative(path), sha256=sha256_file(path), size=path.stat().st_size)


def pin_onnx(project: Project, path: Path) -> OnnxPin:
    structure = load_onnx_structure(path)
    return OnnxPin(
        **pin_file(project, path).model_dump(),
        ir_version=structure.ir_version,
        opsets=opset_imports(structure),
        producer=producer(structure),
        inputs=tensor_specs(graph_inputs(structure), path),
        outputs=tensor_specs(list(structure.graph.output), path),
    )


def _exporter(project: Project, model: ResolvedModel, where: str) -> ExporterPin:
    script = model.exporter.script
    if script is None:
        return exporter_pin(model.exporter, None, None, project.root)
    script_path = project.resolve(script, f"{where}.exporter.script")
    return exporter_pin(model.exporter, pin_file(project, script_path), script_path, project.root)


def _fixtures(
    project: Project,
    model: ResolvedModel,
    onnx_pin: OnnxPin,
    tensor_dir: Path,
    pending: PendingTensors,
    where: str,
) -> tuple[TensorSet, FixturePin]:
    spec = model.fixtures
    if spec.path is None:
        arrays = generate_fixtures(onnx_pin.inputs, spec, model.name)
        source, seed = None, spec.seed
    else:
        source_path = project.resolve(spec.path, f"{where}.fixtures.path")
        arrays = fixtures_from_file(source_path, onnx_pin.inputs, spec, model.name)
        source, seed = pin_file(project, source_path), None
    pin = pending.pin(project, tensor_dir / "inputs.npz", arrays)
    samples = next(iter(arrays.values())).shape[0]
    return arrays, FixturePin(**pin.model_dump(), samples=samples, seed=seed, source=source)


def _reference(
    project: Project,
    model: ResolvedModel,
    onnx_path: Path,
    fixtures: TensorSet,
    backend_name: str,
    target: str | None,
    tensor_dir: Path,
    pending: PendingTensors,
) -> ReferencePin:
    job = BackendJob(model=model.name, onnx_path=onnx_path, inputs=fixtures, target=target)
    run = get_backend(backend_name).run(job)
    label = backend_name if target is None else f"{backend_name} on {target}"
    if run.outputs is None:
        raise InputError(f"model {model.name!r}: {label} produced no outputs: {run.error}")
    if backend_name == GOLDEN:
        _refuse_non_finite_golden(model.name, run.outputs)
    file_name = (
        f"outputs.{backend_name}.npz" if target is None else f"outputs.{backend_name}.{target}.npz"
    )
    tensors = pending.pin(project, tensor_dir / file_name, run.outputs)
    stats = [tensor_stats(name, array) for name, array in run.outputs.items()]
    return ReferencePin(backend=backend_name, target=target, tensors=tensors, outputs=stats)


def _refuse_non_finite_golden(model: str, outputs: TensorSet) -> None:
    """A golden with NaN or Inf cannot judge anything; it is bad input, not a baseline."""
    for name, array in outputs.items():
        bad = int(np.count_nonzero(~np.isfinite(array))) if array.dtype.kind == "f" else 0
        if bad:
            raise InputError(
                f"model {model!r}: onnxruntime output {name!r} has {bad} NaN/Inf values on the "
                "fixtures; fix the model or the fixture range (fixtures.low / fixtures.high)"
            )


def host_toolchain() -> HostToolchain:
    return HostToolchain(
        baseline=__version__,
        python=platform.python_version(),
        numpy=_version("numpy"),
        onnx=_version("onnx"),
        onnxruntime=_version("onnxruntime"),
    )


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"
