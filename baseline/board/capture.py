"""`baseline capture`: the bundle a board needs to run a locked model with Toolkit-Lite2."""

from __future__ import annotations

import json
from pathlib import Path

from baseline.backends.base import graph_outputs
from baseline.errors import ConfigError
from baseline.files.fsutil import write_atomic
from baseline.models.lock import FilePin, Lock, ModelLock
from baseline.project.layout import Project
from baseline.project.paths import checked_name, checked_regular_file, regular_files_under
from baseline.toolchain import lite_capture

BUNDLE_FILES = ("capture.py", "model.rknn", "inputs.npz", "request.json")


def write_bundle(project: Project, lock: Lock, model_name: str, target: str, out: Path) -> Path:
    """Copy the pinned .rknn, the fixtures and the capture script into `out`."""
    model = lock.model(model_name)
    if model is None:
        raise ConfigError(f"{project.lock_path}: no model named {model_name!r}")
    conversion = model.conversion(target)
    if conversion is None:
        known = ", ".join(c.target for c in model.conversions) or "none"
        raise ConfigError(
            f"{project.lock_path}: model {model_name!r} has no .rknn for target "
            f"{target!r} (built targets: {known}); run `baseline lock`"
        )
    request = {
        "model": model.name,
        "target": target,
        "platform": conversion.platform,
        "input_names": [spec.name for spec in model.onnx.inputs],
        "output_names": graph_outputs(model.targets) or [spec.name for spec in model.onnx.outputs],
        # image fixtures are uint8 NHWC pixels, fed as the board's own code feeds them
        "data_formats": [_data_format(model, spec.name) for spec in model.onnx.inputs],
    }
    files = {
        "model.rknn": _pinned_bytes(project, conversion.artifact, "artifact"),
        "inputs.npz": _pinned_bytes(project, model.fixtures, "fixtures"),
        "capture.py": Path(lite_capture.__file__).read_bytes(),
        "request.json": (json.dumps(request, indent=2) + "\n").encode(),
    }
    for name, data in files.items():
        # replaces a committed symlink instead of writing through it to wherever it points
        write_atomic(out / name, data)
    return out


def _data_format(model: ModelLock, name: str) -> str:
    feed = model.fixtures.feed(name)
    return feed.toolkit_format if feed is not None else "nchw"


def capture_dir(project: Project, lock: Lock, model: str, target: str) -> Path:
    """`<captures>/<model>/<target>`, refused if a symlink along the way leaves the project."""
    checked_name(target, f"{project.lock_path}: captures of model {model!r}")
    return _in_captures(project, lock, model, target)


def model_capture_dir(project: Project, lock: Lock, model: str) -> Path:
    return _in_captures(project, lock, model)


def _in_captures(project: Project, lock: Lock, model: str, *more: str) -> Path:
    checked_name(model, f"{project.lock_path}: captures")
    relative = "/".join((lock.captures, model, *more))
    return project.resolve(relative, f"{project.lock_path}: captures")


def capture_files(project: Project, folder: Path) -> list[Path]:
    """The regular files of a capture folder; symlinks leaving the project are refused."""
    if not folder.is_dir():
        return []
    return regular_files_under(project.root, folder, f"{project.lock_path}: captures")


def _pinned_bytes(project: Project, pin: FilePin, where: str) -> bytes:
    path = checked_regular_file(project.root, project.pinned(pin, where), f"{project.lock_path}: {where}")
    return path.read_bytes()
