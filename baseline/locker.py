"""`baseline lock`: turn the intent into a lock by measuring everything it names.

Each model is one job (`lock_model`), run by an executor (threads, or Ray); a job writes
nothing and returns its lock entry with the bytes of its new files. Files are written only
once every model succeeded, tensors before the lock, so a failure never leaves a lock
pointing at tensors it did not produce.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from baseline.backends import GOLDEN, BackendRun, capabilities, get_backend, needs_board, uses_toolkit
from baseline.backends.base import BoardInputs, BuildReport, backend_job
from baseline.errors import BaselineError, InputError
from baseline.executors import ExecutorOptions, Task, run_tasks
from baseline.fsutil import write_atomic
from baseline.hashing import sha256_bytes, sha256_file
from baseline.images import (
    declared_shapes,
    fixture_feeds,
    image_files,
    image_fixtures,
    image_input,
    image_layout,
)
from baseline.intent import (
    ResolvedModel,
    intent_hash,
    load_intent,
    output_tolerances,
    resolve_models,
)
from baseline.lockfile import load_lock, write_lock
from baseline.models.intent import FixtureSpec, Intent, TargetSpec, expected_failure
from baseline.models.lock import (
    CalibrationPin,
    ConversionPin,
    ExporterPin,
    FilePin,
    FixturePin,
    ImagesPin,
    Lock,
    ModelLock,
    OnnxPin,
    ReferencePin,
    ToolkitPin,
)
from baseline.models.task import TaskSpec
from baseline.onnx_facts import (
    check_external_data,
    graph_inputs,
    load_onnx_structure,
    opset_imports,
    producer,
    tensor_specs,
)
from baseline.project import Project
from baseline.provenance import exporter_pin
from baseline.rknn_file import read_rknn
from baseline.tasks.locking import check_outputs, check_tolerance_keys, locked_tasks
from baseline.tasks.parts import stats_with_parts
from baseline.tensors import TensorSet, concrete_shape, fixtures_from_file, generate_fixtures, npz_bytes
from baseline.toolchain.provision import Progress, ensure_toolchains, find_toolchain
from baseline.toolchain.signatures import check_settings
from baseline.versions import host_toolchain

if TYPE_CHECKING:
    from baseline.selfcheck import SelfCheck

OWNED_SUFFIXES = (".npz", ".rknn")
"""What baseline writes into a model's tensor folder; the folder is baseline's own."""


@dataclass
class PendingFiles:
    """Tensor and artifact files to write once the whole lock is known: path → bytes."""

    files: dict[Path, bytes] = field(default_factory=dict)

    def pin(self, project: Project, directory: Path, stem: str, suffix: str, data: bytes) -> FilePin:
        """Pin `data` under a content-addressed name (`stem.<sha256[:12]>suffix`).

        A new baseline never overwrites the files the current lock points at, so a lock run
        that is interrupted leaves the old lock and its files intact.
        """
        digest = sha256_bytes(data)
        path = directory / f"{stem}.{digest[:12]}{suffix}"
        self.files[path] = data
        return FilePin(path=project.relative(path), sha256=digest, size=len(data))

    def pin_arrays(self, project: Project, directory: Path, stem: str, arrays: TensorSet) -> FilePin:
        return self.pin(project, directory, stem, ".npz", npz_bytes(arrays))

    def add(self, other: PendingFiles) -> None:
        self.files.update(other.files)

    def write(self) -> None:
        for path, data in self.files.items():
            write_atomic(path, data)

    def collect_garbage(self) -> list[Path]:
        """Remove tensors and artifacts in the written folders that the new lock no longer pins."""
        removed = []
        for directory in {path.parent for path in self.files}:
            for stale in directory.iterdir():
                if stale.suffix in OWNED_SUFFIXES and stale not in self.files:
                    stale.unlink(missing_ok=True)
                    removed.append(stale)
        return removed


@dataclass
class Measurement:
    """What one backend run on one target adds to the lock."""

    reference: ReferencePin | None
    conversion: ConversionPin | None
    toolkit: ToolkitPin | None


@dataclass
class LockOutcome:
    lock: Lock
    changed: bool
    self_check: SelfCheck | None = None
    """The new baseline judged by its own gates (see `baseline.selfcheck`)."""


@dataclass
class ModelOutcome:
    """What one model's job returns: its lock entry, the files it pins, the toolkits it ran."""

    model: ModelLock
    files: PendingFiles
    toolkits: dict[str, ToolkitPin]


def lock_project(
    project: Project,
    progress: Progress | None = None,
    options: ExecutorOptions | None = None,
    strict: bool = False,
) -> LockOutcome:
    """Build the lock for every model in the intent and write it (only if it changed).

    The new baseline is judged by its own consistency and task gates first; with `strict`, a
    baseline that fails them is refused (nothing is written) with the values that would pass.
    """
    with project.exclusive():  # a second `baseline lock` waits instead of interleaving writes
        return write_new_lock(project, progress, options, strict)


def write_new_lock(
    project: Project,
    progress: Progress | None = None,
    options: ExecutorOptions | None = None,
    strict: bool = False,
) -> LockOutcome:
    """Build, self-check and write the lock; the caller holds `project.exclusive()`."""
    lock, pending = build_lock(project, progress, options)
    return write_checked(project, lock, pending, strict)


def write_checked(project: Project, lock: Lock, pending: PendingFiles, strict: bool = False) -> LockOutcome:
    from baseline.selfcheck import self_check  # runs the gates, which import this module's neighbours

    checked = self_check(project, lock, pending.files)
    if strict and checked.failed:
        raise InputError(
            f"{project.lock_path}: not written, the new baseline fails its own gates; "
            + "; ".join(checked.lines())
        )
    pending.write()
    changed = write_lock(project.lock_path, lock)
    pending.collect_garbage()  # only once the new lock is in place
    return LockOutcome(lock=lock, changed=changed, self_check=checked)


def stale_files(project: Project, pending: PendingFiles) -> list[str]:
    """Tensor and artifact files whose bytes would change (for `baseline lock --check`)."""
    return [
        project.relative(path)
        for path, data in pending.files.items()
        if not path.is_file() or path.read_bytes() != data
    ]


def build_lock(
    project: Project, progress: Progress | None = None, options: ExecutorOptions | None = None
) -> tuple[Lock, PendingFiles]:
    """Measure everything the intent names, one job per model; nothing is written."""
    intent = load_intent(project.intent_path)
    resolved = resolve_models(intent)
    ensure_toolchains(_toolkit_versions(resolved), progress)
    _check_conversion_settings(project, resolved)
    previous = _previous_lock(project.lock_path)
    tensor_dir = _tensor_dir(project, intent)
    captures = project.resolve(intent.project.captures, f"{project.intent_path}: project.captures")
    tasks = [
        Task(
            name=f"lock {model.name}",
            call=lock_model,
            args=(project, model, Workspace(tensor_dir / model.name, captures, _previous(previous, model))),
            resources=_board_resources(model),
            owner=f"model {model.name!r}",
        )
        for model in resolved
    ]

    if progress is not None:
        progress(f"locking {len(tasks)} models: {', '.join(model.name for model in resolved)}")
    done = _report_done(tasks, progress) if progress is not None else None
    outcomes: list[ModelOutcome] = run_tasks(tasks, options or ExecutorOptions(), done)
    pending, toolkits = PendingFiles(), {}
    for outcome in outcomes:
        pending.add(outcome.files)
        toolkits.update(outcome.toolkits)
    lock = Lock(
        inputs_hash=intent_hash(intent),
        toolchain=host_toolchain(),
        captures=intent.project.captures,
        toolkits=[toolkits[version] for version in sorted(toolkits)],
        models=[outcome.model for outcome in outcomes],
        **_carried_over(previous),
    )
    return _keep_information(lock, previous), pending


def _report_done(tasks: list[Task], progress: Progress) -> Callable[[int, Any, float], None]:
    """One line per finished model: `lock` and `accept` convert every target, which takes minutes."""
    finished = 0

    def done(index: int, _value: Any, seconds: float) -> None:
        nonlocal finished
        finished += 1
        progress(f"[{finished}/{len(tasks)}] {tasks[index].name} done in {seconds:.1f} s")

    return done


def _keep_information(lock: Lock, previous: Lock | None) -> Lock:
    """The previous lock, as it is, when nothing decisive changed.

    What differs then is information: the library versions that produced the results, and
    statistics another numpy rounds differently from the same tensors. Another machine with
    newer patch releases that reproduces the results must not rewrite the lock (nor fail
    `lock --check`), or the lock would flap between machines.
    """
    if previous is None or lock.decisive() != previous.decisive():
        return lock
    return previous


def _toolkit_versions(models: list[ResolvedModel]) -> set[str]:
    return {model.toolkit.version for model in models if uses_toolkit(model.backends)}


def _check_conversion_settings(project: Project, models: list[ResolvedModel]) -> None:
    """Every toolkit argument the intent sets must exist in its pinned version, before any work."""
    for model in models:
        toolchain = find_toolchain(model.toolkit.version) if uses_toolkit(model.backends) else None
        if toolchain is None:
            continue
        for target in model.targets:
            where = f"{project.intent_path}: models.{model.name}, target {target.name!r}"
            check_settings(target.conversion, toolchain, where)


def _board_resources(model: ResolvedModel) -> dict[str, float]:
    """A model measured on a board backend locks on the host that has the board (see verify)."""
    if not needs_board(model.backends):
        return {}
    return {target.platform: 1.0 for target in model.targets}


def _previous(previous: Lock | None, model: ResolvedModel) -> ModelLock | None:
    return previous.model(model.name) if previous is not None else None


def _tensor_dir(project: Project, intent: Intent) -> Path:
    if intent.project.tensors is None:
        return project.default_tensor_dir()
    return project.resolve(intent.project.tensors, f"{project.intent_path}: project.tensors")


def _previous_lock(lock_path: Path) -> Lock | None:
    """The lock being replaced; an unreadable one is simply replaced."""
    if not lock_path.is_file():
        return None
    try:
        return load_lock(lock_path)
    except BaselineError:
        return None


def _carried_over(previous: Lock | None) -> dict[str, Any]:
    """What a relock keeps from the old lock: the audit trail, the boards observed on hardware and
    the last calibration (provenance of the intent's tolerances; its entries name the ONNX hash)."""
    if previous is None:
        return {}
    return {"audit": previous.audit, "boards": previous.boards, "calibration": previous.calibration}


@dataclass(frozen=True)
class Workspace:
    """Where one model's files go and what the current lock pins for it."""

    tensor_dir: Path
    captures: Path
    previous: ModelLock | None
    """The model's entry in the lock being replaced (its `.rknn` bytes are kept when unchanged)."""
    pending: PendingFiles = field(default_factory=PendingFiles)


def lock_model(project: Project, model: ResolvedModel, workspace: Workspace) -> ModelOutcome:
    """One model's job: measure it and pin its files in memory. The same call runs in a local
    thread or a Ray worker; it writes nothing."""
    where = f"{project.intent_path}: models.{model.name}"
    onnx_path = project.resolve(model.onnx, f"{where}.onnx")
    onnx_pin = pin_onnx(project, onnx_path)
    fixtures, fixture_pin = _fixtures(project, model, onnx_pin, workspace, where)
    tasks = _tasks(project, model, onnx_pin, where)  # parts checked before they are measured
    calibration = calibration_pin(project, model, where)
    context = MeasureContext(
        project, model, onnx_path, onnx_pin, fixtures, fixture_pin, workspace, calibration
    )
    measured = [
        _measure(context, backend, target)
        for backend in model.backends
        for target in (model.targets if capabilities(backend).per_target else [None])
    ]
    entry = ModelLock(
        name=model.name,
        targets=model.targets,
        backends=model.backends,
        toolkit=model.toolkit,
        onnx=onnx_pin,
        exporter=_exporter(project, model, where),
        fixtures=fixture_pin,
        calibration=calibration,
        references=[m.reference for m in measured if m.reference is not None],
        conversions=[m.conversion for m in measured if m.conversion is not None],
        tolerances=output_tolerances(model.tolerances, [spec.name for spec in onnx_pin.outputs], model.parts),
        expect_fail=model.expect_fail,
        parts=model.parts,
        tasks=tasks,
    )
    toolkits = {m.toolkit.version: m.toolkit for m in measured if m.toolkit is not None}
    return ModelOutcome(entry, workspace.pending, toolkits)


def _tasks(project: Project, model: ResolvedModel, onnx_pin: OnnxPin, where: str) -> list[TaskSpec]:
    outputs = [spec.name for spec in onnx_pin.outputs]
    check_outputs(model.parts, model.tasks, outputs, where)
    check_tolerance_keys(list(model.tolerances.outputs), model.parts, outputs, where)
    return locked_tasks(model.tasks, project.resolve, where)


def pin_file(project: Project, path: Path) -> FilePin:
    return FilePin(path=project.relative(path), sha256=sha256_file(path), size=path.stat().st_size)


def pin_onnx(project: Project, path: Path) -> OnnxPin:
    structure = load_onnx_structure(path)
    check_external_data(structure, path)
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
    workspace: Workspace,
    where: str,
) -> tuple[TensorSet, FixturePin]:
    # shapes fixed by load_onnx(input_size_list=...) size the fixtures unless they say otherwise
    spec = model.fixtures.model_copy(
        update={"shapes": {**declared_shapes(model.conversion), **model.fixtures.shapes}}
    )
    images: ImagesPin | None = None
    if spec.images is not None:
        arrays, images = _image_fixtures(project, model, onnx_pin, spec, where)
        source, seed = None, spec.seed
    elif spec.path is None:
        arrays = generate_fixtures(onnx_pin.inputs, spec, model.name)
        source, seed = None, spec.seed
    else:
        source_path = project.resolve(spec.path, f"{where}.fixtures.path")
        arrays = fixtures_from_file(source_path, onnx_pin.inputs, spec, model.name)
        source, seed = pin_file(project, source_path), None
    pin = workspace.pending.pin_arrays(project, workspace.tensor_dir, "inputs", arrays)
    samples = next(iter(arrays.values())).shape[0]
    feeds = fixture_feeds(spec, model.conversion, onnx_pin.inputs, model.name)
    return arrays, FixturePin(
        **pin.model_dump(), samples=samples, seed=seed, source=source, images=images, feeds=feeds
    )


def _image_fixtures(
    project: Project, model: ResolvedModel, onnx_pin: OnnxPin, spec: FixtureSpec, where: str
) -> tuple[TensorSet, ImagesPin]:
    """Pixels for the image input (uint8 NHWC); any other input generated from the seed."""
    images = spec.images
    assert images is not None
    name = image_input(images, onnx_pin.inputs, model.name)
    files = image_files(project.resolve, images.path, f"{where}.fixtures.images.path", images.samples)
    tensor = next(t for t in onnx_pin.inputs if t.name == name)
    shape = concrete_shape(tensor, spec.shapes, model.name)
    pixels = image_fixtures(files, images, shape, image_layout(tensor, shape, model.name))
    others = [t for t in onnx_pin.inputs if t.name != name]
    arrays = generate_fixtures(others, spec.model_copy(update={"samples": len(files)}), model.name)
    pin = ImagesPin(
        input=name,
        resize=images.resize,
        pad=images.pad,
        channels=images.channels,
        files=[pin_file(project, file) for file in files],
    )
    return {name: pixels, **arrays}, pin


def calibration_pin(project: Project, model: ResolvedModel, where: str) -> CalibrationPin | None:
    """The calibration set's files by hash, and one hash over their names and contents."""
    spec = model.calibration
    if spec is None:
        return None
    files = image_files(project.resolve, spec.path, f"{where}.calibration.path", spec.samples)
    pins = [pin_file(project, file) for file in files]
    return CalibrationPin(sha256=calibration_manifest(pins), files=pins)


def calibration_manifest(files: list[FilePin]) -> str:
    """One hash over the set: renaming, reordering or editing an image changes it."""
    return sha256_bytes("".join(f"{pin.sha256}  {pin.path}\n" for pin in files).encode())


@dataclass(frozen=True)
class MeasureContext:
    """Everything about one model that each backend measurement needs."""

    project: Project
    model: ResolvedModel
    onnx_path: Path
    onnx_pin: OnnxPin
    fixtures: TensorSet
    fixture_pin: FixturePin
    workspace: Workspace
    calibration: CalibrationPin | None = None


def _measure(context: MeasureContext, backend_name: str, target: TargetSpec | None) -> Measurement:
    model = context.model
    job = backend_job(
        model.name,
        context.onnx_path,
        context.onnx_pin,
        context.fixtures,
        target,
        model.toolkit,
        _board_inputs(context, target),
        targets=model.targets,
        feeds=context.fixture_pin.feeds,
        calibration=_calibration_files(context),
    )
    run = get_backend(backend_name).run(job)
    label = backend_name if target is None else f"{backend_name} on {target.name}"
    if run.outputs is None:
        if _expects_failure(model, target):
            return Measurement(reference=None, conversion=None, toolkit=_toolkit_pin(run))
        raise InputError(
            f"model {model.name!r}: {label} produced no outputs: {run.error}; fix the model, or "
            'mark it in the intent file with [[models.expect_fail]] gate = "compilable"'
        )
    if backend_name == GOLDEN:
        _refuse_non_finite_golden(model.name, run.outputs)
    suffix = backend_name if target is None else f"{backend_name}.{target.name}"
    tensors = context.workspace.pending.pin_arrays(
        context.project, context.workspace.tensor_dir, f"outputs.{suffix}", run.outputs
    )
    stats = stats_with_parts(model.parts, run.outputs)
    reference = ReferencePin(backend=backend_name, target=job.target_name, tensors=tensors, outputs=stats)
    return Measurement(
        reference=reference, conversion=_conversion(context, run, target), toolkit=_toolkit_pin(run)
    )


def _calibration_files(context: MeasureContext) -> list[Path] | None:
    pin = context.calibration
    if pin is None:
        return None
    return [context.project.resolve(file.path, "calibration") for file in pin.files]


def _board_inputs(context: MeasureContext, target: TargetSpec | None) -> BoardInputs | None:
    """For board captures: the artifact already pinned on disk (a relock keeps its bytes)."""
    if target is None:
        return None
    return BoardInputs(
        artifact=_pinned_artifact(context, target),
        fixtures_sha256=context.fixture_pin.sha256,
        capture_dir=context.workspace.captures / context.model.name / target.name,
    )


def _expects_failure(model: ResolvedModel, target: TargetSpec | None) -> bool:
    return expected_failure(model.expect_fail, "compilable", target.name if target else None) is not None


def _conversion(context: MeasureContext, run: BackendRun, target: TargetSpec | None) -> ConversionPin | None:
    build = run.build
    if build is None or build.artifact is None or build.metadata is None or target is None:
        return None
    data = _artifact_bytes(_pinned_artifact(context, target), build)
    artifact = context.workspace.pending.pin(
        context.project, context.workspace.tensor_dir, target.name, ".rknn", data
    )
    return ConversionPin(
        target=target.name,
        platform=target.platform,
        quantization=target.quantization,
        calibration_sha256=_calibration_sha256(context) if target.quantized else None,
        artifact=artifact,
        metadata=build.metadata,
    )


def _calibration_sha256(context: MeasureContext) -> str:
    return context.calibration.sha256 if context.calibration is not None else context.fixture_pin.sha256


def _pinned_artifact(context: MeasureContext, target: TargetSpec) -> Path | None:
    """The `.rknn` the current lock pins for this model and target, if it is on disk."""
    previous = context.workspace.previous
    pin = previous.conversion(target.name) if previous is not None else None
    if pin is None:
        return None
    path = context.project.resolve(pin.artifact.path, f"{context.project.lock_path}: conversions")
    return path if path.is_file() else None


def _artifact_bytes(existing: Path | None, build: BuildReport) -> bytes:
    """The new artifact, unless the one on disk has the same fingerprint.

    Identical conversions differ in a few hundred volatile bytes; keeping the pinned file
    when the fingerprint says it is the same model keeps `baseline lock` byte-stable.
    """
    assert build.artifact is not None and build.metadata is not None
    fingerprint = build.metadata.fingerprint
    if fingerprint is not None and existing is not None:
        with contextlib.suppress(BaselineError):
            if read_rknn(existing).fingerprint == fingerprint:
                return existing.read_bytes()
    return build.artifact.read_bytes()


def _toolkit_pin(run: BackendRun) -> ToolkitPin | None:
    versions = dict(run.versions)
    if "rknn-toolkit2" not in versions:
        return None
    return ToolkitPin(
        version=versions.pop("rknn-toolkit2"),
        commit=versions.pop("rknn-toolkit2-commit", None),
        python=versions.pop("python", ""),
        packages=versions,
    )


def _refuse_non_finite_golden(model: str, outputs: TensorSet) -> None:
    """A golden with NaN or Inf cannot judge anything; it is bad input, not a baseline."""
    for name, array in outputs.items():
        bad = int(np.count_nonzero(~np.isfinite(array))) if array.dtype.kind == "f" else 0
        if bad:
            raise InputError(
                f"model {model!r}: onnxruntime output {name!r} has {bad} NaN/Inf values on the "
                "fixtures; fix the model or the fixture range (fixtures.low / fixtures.high)"
            )
