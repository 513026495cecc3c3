"""One model's lock job: its ONNX facts, fixtures, calibration set, tasks, and a measurement per
backend and target. It writes nothing; the project step writes once every model succeeded."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from baseline.backends import capabilities
from baseline.backends.base import graph_outputs
from baseline.errors import InputError
from baseline.files.images import (
    check_calibration_images,
    declared_shapes,
    fixture_feeds,
    image_files,
    image_fixtures,
    image_input,
    image_layout,
)
from baseline.files.tensors import (
    TensorSet,
    check_fixture_dtypes,
    check_fixture_shapes,
    concrete_shape,
    fixtures_from_file,
    generate_fixtures,
)
from baseline.locker.files import PendingFiles, Workspace, calibration_manifest, pin_file, pin_onnx
from baseline.locker.measure import BackendMeasurement, MeasureContext, measure_backend
from baseline.models.intent import FixtureSpec
from baseline.models.lock import (
    CalibrationPin,
    ExporterPin,
    FixturePin,
    ImagesPin,
    ModelLock,
    OnnxPin,
    ToolkitPin,
)
from baseline.models.task import TaskSpec
from baseline.project.intent import (
    ResolvedModel,
    output_tolerances,
)
from baseline.project.layout import Project
from baseline.project.provenance import exporter_pin
from baseline.tasks.locking import check_class_axes, check_outputs, check_tolerance_keys, locked_tasks


@dataclass
class ModelOutcome:
    """What one model's job returns: its lock entry, the files it pins, the toolkits it ran."""

    model: ModelLock
    files: PendingFiles
    toolkits: dict[str, ToolkitPin]


def lock_model(project: Project, model: ResolvedModel, workspace: Workspace) -> ModelOutcome:
    """One model's job: measure it and pin its files in memory. The same call runs in a local
    thread or a Ray worker; it writes nothing."""
    where = f"{project.intent_path}: models.{model.name}"
    onnx_path = _existing_onnx(project.resolve(model.onnx, f"{where}.onnx", file=True), model.onnx, where)
    onnx_pin = pin_onnx(project, onnx_path)
    fixtures, fixture_pin = _fixtures(project, model, onnx_pin, workspace, where)
    tasks = _tasks(project, model, onnx_pin, where)  # parts checked before they are measured
    calibration = calibration_pin(project, model, onnx_pin, where)
    context = MeasureContext(
        project, model, onnx_path, onnx_pin, fixtures, fixture_pin, workspace, calibration
    )
    measured = [
        measure_backend(context, backend, target)
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
    entry = _with_label_scores(project, entry, fixtures, measured, where)
    toolkits = {m.toolkit.version: m.toolkit for m in measured if m.toolkit is not None}
    return ModelOutcome(entry, workspace.pending, toolkits)


def _with_label_scores(
    project: Project, entry: ModelLock, fixtures: TensorSet, measured: list[BackendMeasurement], where: str
) -> ModelLock:
    """The entry with each labelled task's accuracy on every backend and target it measured."""
    from baseline.tasks.labels import geometry_of, labelled, load_model_labels, model_scores

    if not labelled(entry):
        return entry
    labels = load_model_labels(entry, project.resolve, where)
    geometry = geometry_of(entry, fixtures)
    scores = [
        score
        for m in measured
        if m.reference is not None and m.outputs is not None
        for score in model_scores(entry, labels, m.outputs, geometry, m.reference.backend, m.reference.target)
    ]
    return entry.model_copy(update={"label_scores": scores})


def _tasks(project: Project, model: ResolvedModel, onnx_pin: OnnxPin, where: str) -> list[TaskSpec]:
    outputs = [spec.name for spec in onnx_pin.outputs]
    # a graph cut (`load_onnx(outputs=...)`) is model-wide: every backend returns those tensors
    check_outputs(model.parts, model.tasks, graph_outputs(model.targets) or outputs, where)
    check_tolerance_keys(list(model.tolerances.outputs), model.parts, outputs, where)
    check_class_axes(model.tasks, onnx_pin.outputs, where)
    return locked_tasks(model.tasks, project.resolve, where, project.root)


def _existing_onnx(path: Path, written: str, where: str) -> Path:
    """`path` if it is a file, else one line naming the key and the closest ONNX file beside it."""
    if path.is_file():
        return path
    beside = sorted(p.name for p in path.parent.glob("*.onnx")) if path.parent.is_dir() else []
    close = difflib.get_close_matches(path.name, beside, n=1)
    meant = (
        f"; did you mean {str(PurePosixPath(written).parent / close[0])!r}?" if close else "; fix the path"
    )
    raise InputError(f"{where}.onnx: {written!r} is not a file{meant}")


def _exporter(project: Project, model: ResolvedModel, where: str) -> ExporterPin:
    script = model.exporter.script
    if script is None:
        return exporter_pin(model.exporter, None, None, project.root)
    script_path = project.resolve(script, f"{where}.exporter.script", file=True)
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
    check_fixture_dtypes(onnx_pin.inputs, model.name)
    check_fixture_shapes(onnx_pin.inputs, model.fixtures.shapes, where)
    check_fixture_shapes(onnx_pin.inputs, model.fixtures.ranges, where, key="ranges")
    images: ImagesPin | None = None
    if spec.images is not None:
        arrays, images = _image_fixtures(project, model, onnx_pin, spec, where)
        source, seed = None, spec.seed
    elif spec.path is None:
        arrays = generate_fixtures(onnx_pin.inputs, spec, model.name)
        source, seed = None, spec.seed
    else:
        source_path = project.resolve(spec.path, f"{where}.fixtures.path", file=True)
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


def calibration_pin(
    project: Project, model: ResolvedModel, onnx_pin: OnnxPin, where: str
) -> CalibrationPin | None:
    """The calibration set's files by hash, and one hash over their names and contents."""
    spec = model.calibration
    if spec is None:
        return None
    if len(onnx_pin.inputs) > 1:  # said here, before anything converts: the toolkit says it mid-build
        names = ", ".join(repr(tensor.name) for tensor in onnx_pin.inputs)
        raise InputError(
            f"{where}.calibration: images calibrate a model of one input, and {model.name!r} has "
            f"{len(onnx_pin.inputs)} ({names}), each of which the toolkit wants on every line of its "
            "dataset; remove `calibration` and the fixtures calibrate the int8 builds (one .npy per input)"
        )
    files = image_files(project.resolve, spec.path, f"{where}.calibration.path", spec.samples)
    check_calibration_images(files, f"{where}.calibration.path")
    pins = [pin_file(project, file) for file in files]
    return CalibrationPin(sha256=calibration_manifest(pins), files=pins)
