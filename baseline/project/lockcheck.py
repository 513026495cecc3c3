"""The lock's rules must be the intent's: verify never trusts a rule only the lock declares.

A pull request can edit the generated lock without touching the reviewed intent file. Its
`inputs_hash` is only a claim the lock makes about itself, so every rule verify acts on
(the model list, targets, backends, toolkit settings, tolerances, expected failures, where
the ONNX and the captures are) is recomputed from the intent the way `baseline lock` resolves
it, and any difference is refused. What the lock measured (hashes, statistics, `.rknn`
metadata) is checked by the gates themselves.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from baseline.errors import ConfigError
from baseline.files.images import fixture_feeds, image_files, image_input
from baseline.models.intent import Intent
from baseline.models.lock import Lock, ModelLock
from baseline.models.tensors import TensorSpec
from baseline.project.intent import ResolvedModel, output_tolerances, resolve_models
from baseline.project.layout import Project
from baseline.tasks.locking import locked_tasks


def check_lock_follows_intent(project: Project, lock: Lock, intent: Intent) -> None:
    """Refuse a lock whose models or rules differ from what the intent resolves to."""
    _check_model_set(project, lock, intent)
    if lock.captures != intent.project.captures:
        _refuse(project, "captures", "project.captures")
    images = ImageLists(project)
    for wanted in resolve_models(intent):
        model = lock.model(wanted.name)
        assert model is not None  # _check_model_set made sure
        for key, locked, intended in _rules(project, model, wanted, images):
            if locked != intended:
                _refuse(project, f"models.{model.name}.{key}", f"models.{model.name}")


def _check_model_set(project: Project, lock: Lock, intent: Intent) -> None:
    names = [model.name for model in lock.models]
    # counted and looked up through sets: `list.count` per name is quadratic in a 1,000-model zoo
    repeated = sorted(name for name, seen in Counter(names).items() if seen > 1)
    if repeated:
        raise ConfigError(
            f"{project.lock_path}: model {repeated[0]!r} appears more than once in the lock; {_fix(project)}"
        )
    wanted = [model.name for model in intent.models]
    locked, intended = set(names), set(wanted)
    missing = [name for name in wanted if name not in locked]
    if missing:
        raise ConfigError(
            f"{project.lock_path}: model {missing[0]!r} of the intent file {project.intent_path} "
            f"is missing from the lock; {_fix(project)}"
        )
    extra = [name for name in names if name not in intended]
    if extra:
        raise ConfigError(
            f"{project.lock_path}: model {extra[0]!r} is not in the intent file "
            f"{project.intent_path}; {_fix(project)}"
        )


class ImageLists:
    """`image_files` for a whole intent: a zoo's models share one folder or glob of images, which
    is listed (and each match confined) once rather than once per model."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self._known: dict[tuple[str, int | None], list[Path]] = {}

    def files(self, path: str, where: str, samples: int | None) -> list[Path]:
        found = self._known.get((path, samples))
        if found is None:  # a refused path raises here, naming its own model's key
            found = self._known[(path, samples)] = image_files(self.project.resolve, path, where, samples)
        return found


def _rules(
    project: Project, model: ModelLock, wanted: ResolvedModel, images: ImageLists
) -> list[tuple[str, Any, Any]]:
    """(key, the lock's value, the intent's value) for every rule a gate reads from the lock."""
    where = f"{project.intent_path}: models.{wanted.name}"
    outputs = [spec.name for spec in model.onnx.outputs]
    rules: list[tuple[str, Any, Any]] = [
        ("targets", model.targets, wanted.targets),
        ("backends", model.backends, wanted.backends),
        ("toolkit", model.toolkit, wanted.toolkit),
        ("expect_fail", model.expect_fail, wanted.expect_fail),
        ("tolerances", model.tolerances, output_tolerances(wanted.tolerances, outputs, wanted.parts)),
        (
            "onnx.path",
            project.pinned(model.onnx, f"models.{model.name}.onnx"),
            project.resolve(wanted.onnx, f"{where}.onnx", file=True),
        ),
        ("fixtures.seed", model.fixtures.seed, _fixture_seed(wanted)),
        ("parts", model.parts, wanted.parts),
        # a lock holds a CTC alphabet file's symbols: compare with the file as it is now
        ("tasks", model.tasks, locked_tasks(wanted.tasks, project.resolve, where, project.root)),
    ]
    if wanted.fixtures.path is None and wanted.fixtures.images is None:
        rules.append(("fixtures.samples", model.fixtures.samples, wanted.fixtures.samples))
    # how onnxruntime is fed (mean/std, layout), the image files and the calibration set
    rules += [
        (
            "fixtures.feeds",
            model.fixtures.feeds,
            fixture_feeds(wanted.fixtures, wanted.conversion, model.onnx.inputs, wanted.name),
        ),
        (
            "fixtures.images",
            _locked_images(project, model),
            _intended_images(images, wanted, model.onnx.inputs, where),
        ),
        ("calibration", _locked_calibration(project, model), _intended_calibration(images, wanted, where)),
    ]
    source = model.fixtures.source
    rules.append(
        (
            "fixtures.source",
            project.pinned(source, f"models.{model.name}.fixtures.source") if source else None,
            project.resolve(wanted.fixtures.path, f"{where}.fixtures.path", file=True)
            if wanted.fixtures.path
            else None,
        )
    )
    # a conversion carries its own platform and quantization: they must be its target's
    targets = {target.name: target for target in wanted.targets}
    for conversion in model.conversions:
        target = targets.get(conversion.target)
        rules.append(
            (
                f"conversions.{conversion.target}",
                (conversion.platform, conversion.quantization),
                (target.platform, target.quantization) if target is not None else None,
            )
        )
    return rules


def _locked_images(project: Project, model: ModelLock) -> Any:
    images = model.fixtures.images
    if images is None:
        return None
    where = f"models.{model.name}.fixtures.images"
    files = [project.pinned(pin, where) for pin in images.files]
    return (images.input, images.resize, images.pad, images.channels, files)


def _intended_images(lists: ImageLists, wanted: ResolvedModel, inputs: list[TensorSpec], where: str) -> Any:
    images = wanted.fixtures.images
    if images is None:
        return None
    files = lists.files(images.path, f"{where}.fixtures.images.path", images.samples)
    chosen = image_input(images, inputs, wanted.name)
    return (chosen, images.resize, images.pad, images.channels, files)


def _locked_calibration(project: Project, model: ModelLock) -> list[Path] | None:
    pin = model.calibration
    where = f"models.{model.name}.calibration"
    return [project.pinned(file, where) for file in pin.files] if pin is not None else None


def _intended_calibration(lists: ImageLists, wanted: ResolvedModel, where: str) -> list[Path] | None:
    spec = wanted.calibration
    if spec is None:
        return None
    return lists.files(spec.path, f"{where}.calibration.path", spec.samples)


def _fixture_seed(wanted: ResolvedModel) -> int | None:
    """Generated fixtures record their seed; fixtures from a file record none."""
    return wanted.fixtures.seed if wanted.fixtures.path is None else None


def _refuse(project: Project, key: str, intent_key: str) -> None:
    raise ConfigError(
        f"{project.lock_path}: {key} differs from {intent_key} in the intent file "
        f"{project.intent_path} (the lock was edited or is out of date); {_fix(project)}"
    )


def _fix(project: Project) -> str:
    return f"run `baseline lock --lock {project.lock_path}`"
