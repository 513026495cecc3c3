"""The first divergent layer of a failing comparison is found with image fixtures too: the
toolkit's `accuracy_analysis` takes `.npy` inputs in the ONNX layout, not the board's NHWC pixels."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.toolkit

INTENT = """[[models]]
name = "overflow"
onnx = "models/overflow.onnx"
targets = ["rk3588"]
backends = ["onnxruntime", "rknn-sim"]
fixtures = { images = { path = "photos", samples = 1 } }

[[models.expect_fail]]
gate = "consistency"
target = "rk3588"
reason = "activations reach 1e11, past fp16's 65504"
"""


def test_an_fp16_overflow_fed_photos_names_the_layer_where_it_starts(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    (tmp_path / "models").mkdir()
    shutil.copy(REPO / "fixtures" / "demo" / "overflow.onnx", tmp_path / "models" / "overflow.onnx")
    (tmp_path / "photos").mkdir()
    for photo in sorted((REPO / "fixtures" / "images" / "coco").glob("*.jpg"))[:1]:
        shutil.copy(photo, tmp_path / "photos" / photo.name)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "baseline.toml").write_text(INTENT)
    code, _, err = cli(tmp_path, "lock")
    assert code == 0, err
    code, out, _ = cli(tmp_path, "verify", "--no-cache", "--format", "json")
    [result] = [r for r in json.loads(out)["results"] if r["gate"] == "consistency" and r["target"]]
    assert result["status"] == "xfail"
    assert result["metrics"]["analysis_error"] is None
    assert "first divergent layer [Conv] scaled" in result["summary"], result["summary"]
    assert result["metrics"]["layers"][0]["op"] == "Input"


CLASSIFIER = """[[models]]
name = "classifier"
onnx = "models/classifier.onnx"
targets = [{ name = "rk3588-w8a8", platform = "rk3588", quantization = { dtype = "w8a8" } }]
backends = ["onnxruntime", "rknn-sim"]
fixtures = { images = { path = "photos", samples = 2 } }
calibration = { path = "photos" }

[models.conversion.config]
mean_values = [[0, 0, 0]]
std_values = [[255, 255, 255]]
"""


def photo_project(root: Path, model: str, intent: str, photos: int) -> Path:
    (root / "models").mkdir(parents=True)
    shutil.copy(REPO / "fixtures" / "demo" / f"{model}.onnx", root / "models" / f"{model}.onnx")
    (root / "photos").mkdir()
    for photo in sorted((REPO / "fixtures" / "images" / "coco").glob("*.jpg"))[:photos]:
        shutil.copy(photo, root / "photos" / photo.name)
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (root / "baseline.toml").write_text(intent)
    return root


def test_the_html_report_plots_the_layers_of_an_overflow_fed_photos(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    project = photo_project(tmp_path, "overflow", INTENT, 1)
    assert cli(project, "lock")[0] == 0
    code, _, err = cli(project, "verify", "--format", "html", "--output", "report.html")
    assert code == 0, err
    page = (project / "report.html").read_text()
    assert "Per-layer cosine" in page and "scaled" in page


def test_an_int8_build_fed_photos_is_analysed_layer_by_layer(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    """Where an int8 build loses accuracy: the analysis runs on the quantized build with the
    board's pixels, calibrated on the photos (as the zoo's convert.py scripts do)."""
    from baseline.gates.context import VerifyContext
    from baseline.project.layout import Project
    from baseline.project.lockfile import load_lock

    project = photo_project(tmp_path, "classifier", CLASSIFIER, 4)
    code, _, err = cli(project, "lock")
    assert code == 0, err
    lock = load_lock(project / "baseline.lock")
    model = lock.model("classifier")
    assert model is not None
    layers = VerifyContext(Project.locate(project / "baseline.lock"), lock).analyse(
        model, "rknn-sim", "rk3588-w8a8"
    )
    assert layers and layers[0].op == "Input" and layers[0].entire_cosine > 0.99
    # quantization moves every later layer a little from the float golden, never to nothing
    assert all(0.5 < layer.entire_cosine <= 1.0 for layer in layers), [layer.line() for layer in layers]


def test_photo_fixtures_calibrate_a_quantized_build_without_a_calibration_set(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    """Without `calibration`, the fixtures calibrate: the toolkit reads their `.npy` in the ONNX
    layout too (the board's NHWC pixels were refused: "expect 'nchw'", and lock advised
    `expect_fail` on a model that builds)."""
    intent = CLASSIFIER.replace('calibration = { path = "photos" }\n', "")
    project = photo_project(tmp_path, "classifier", intent, 4)
    code, out, err = cli(project, "lock")
    assert code == 0, out + err
    code, out, err = cli(project, "verify", "--no-cache")
    assert code == 0, out + err


def outlier_channel(path: Path, scale: float) -> None:
    """A reparametrisation that keeps the float model's outputs and breaks its int8 build: conv1's
    first channel × `scale` and conv2's reading of it ÷ `scale` (ReLU between commutes with a
    positive scale), so one channel's activations outgrow the per-tensor int8 range of the rest."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(path)
    weights = {init.name: init for init in model.graph.initializer}

    def rescale(name: str, change: Callable[[np.ndarray], None]) -> None:
        array = numpy_helper.to_array(weights[name]).copy()
        change(array)
        weights[name].CopyFrom(numpy_helper.from_array(array, name))

    rescale("conv1.weight", lambda a: a.__setitem__(0, a[0] * scale))
    rescale("conv1.bias", lambda a: a.__setitem__(0, a[0] * scale))
    rescale("conv2.weight", lambda a: a.__setitem__((slice(None), 0), a[:, 0] / scale))
    onnx.save(model, path)


def test_an_int8_regression_names_its_layer_and_explore_in_text_and_html(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    """A model change that keeps onnxruntime's outputs but costs the w8a8 build its accuracy:
    the build's row names the first divergent layer (text and HTML) and advises `explore` before
    any tolerance; the rows comparing with the lock advise accepting or reverting the change."""
    project = photo_project(tmp_path, "classifier", CLASSIFIER, 4)
    assert cli(project, "lock")[0] == 0
    outlier_channel(project / "models" / "classifier.onnx", 1e5)
    code, out, _ = cli(project, "verify", "--format", "json")
    assert code == 1
    rows = {(r["gate"], r["backend"]): r for r in json.loads(out)["results"]}
    golden, build = rows[("consistency", "onnxruntime")], rows[("consistency", "rknn-sim")]
    assert golden["status"] == "pass", golden["summary"]  # the float model's outputs did not move
    assert build["status"] == "fail"
    assert "; first divergent layer [" in build["summary"], build["summary"]
    assert build["hint"].startswith("the changed model's build loses accuracy to quantization from layer [")
    assert "`baseline explore classifier --target rk3588-w8a8`" in build["hint"]
    assert build["hint"].index("explore") < build["hint"].index("if this accuracy is acceptable")
    assert rows[("artifact", "rknn-sim")]["hint"].startswith("the model changed since the lock")
    code, _, _ = cli(project, "verify", "--format", "html", "--output", "report.html")
    assert code == 1
    assert "Per-layer cosine" in (project / "report.html").read_text()
