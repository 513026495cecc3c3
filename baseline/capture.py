"""`baseline capture`: the bundle a board needs to run a locked model with Toolkit-Lite2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from baseline.errors import ConfigError
from baseline.models.lock import Lock
from baseline.project import Project
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
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(project.pinned(conversion.artifact, "artifact"), out / "model.rknn")
    shutil.copyfile(project.pinned(model.fixtures, "fixtures"), out / "inputs.npz")
    shutil.copyfile(lite_capture.__file__, out / "capture.py")
    request = {
        "model": model.name,
        "target": target,
        "platform": conversion.platform,
        "input_names": [spec.name for spec in model.onnx.inputs],
        "output_names": [spec.name for spec in model.onnx.outputs],
    }
    (out / "request.json").write_text(json.dumps(request, indent=2) + "\n")
    return out


def capture_dir(project: Project, lock: Lock, model: str, target: str) -> Path:
    captures = project.resolve(lock.captures, f"{project.lock_path}: captures")
    return captures / model / target
