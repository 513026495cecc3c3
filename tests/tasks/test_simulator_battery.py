"""A slice of the zero-false-alarm battery (`bench/battery.py`, in `nox -s bench`): the PP-OCR
direction classifier (from the rapidocr wheel) on real text lines, fp16 on the rk3588 simulator.
The tolerances are the ones `lock --calibrate` proposes, written into the intent by
`calibrated_intent` (nothing by hand); two unchanged `verify --no-cache` runs pass every gate,
and the same model with its two class rows swapped fails the `task` gate naming the sample, the
classes and the probabilities.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import tomli_w

from baseline.files.tomlfile import read_toml
from baseline.locker import calibrate_project, lock_project
from baseline.locker.selfcheck import calibrated_intent
from baseline.models.results import Status
from baseline.project.layout import Project
from baseline.verification.verify import VerifyOptions, verify_project
from tests.tasks.conftest import IMAGES, PPOCR_CLS, pypi_onnx
from tests.tasks.test_real_models import swapped_classifier_rows

pytestmark = pytest.mark.toolkit  # every test here drives the real toolkit

INTENT = """\
[defaults]
targets = ["rk3588"]

[[models]]
name = "ppocr_cls"
onnx = "cls.onnx"
fixtures = { images = { path = "images/directions.txt", resize = "letterbox", pad = 128 } }

[models.conversion.config]
mean_values = [[127.5, 127.5, 127.5]]
std_values = [[127.5, 127.5, 127.5]]

[models.conversion.load_onnx]
inputs = ["x"]
input_size_list = [[1, 3, 48, 192]]

[[models.tasks]]
kind = "classification"
output = "save_infer_model/scale_0.tmp_1"
top_k = 1
class_names = ["0°", "180°"]
"""
LINES = [
    "receipt_street.png",
    "receipt_street_180.png",
    "sheet_product_code.png",
    "sheet_product_code_180.png",
]


def not_passed(project: Project) -> list[str]:
    report = verify_project(project, options=VerifyOptions(use_cache=False))
    return [
        f"{r.gate} {r.where}: {r.summary}"
        for r in report.results
        if r.status not in (Status.PASS, Status.SKIP)
    ]


def test_calibrated_classifier_passes_twice_unchanged_and_fails_with_swapped_rows(tmp_path: Path) -> None:
    shutil.copyfile(pypi_onnx(*PPOCR_CLS), tmp_path / "cls.onnx")
    shutil.copytree(IMAGES / "text_lines", tmp_path / "images")
    (tmp_path / "images" / "directions.txt").write_text("\n".join(LINES) + "\n")
    (tmp_path / "baseline.toml").write_text(INTENT)
    project = Project.locate(tmp_path / "baseline.lock", root=tmp_path)

    _, calibration = calibrate_project(project, runs=2, margin=1.5)
    (entry,) = [e for e in calibration.entries if e.where == "rknn-sim/rk3588"]
    assert entry.cosine is not None and 0.999 < entry.cosine < 1.0 and entry.refused is None
    intent = calibrated_intent(read_toml(tmp_path / "baseline.toml", "intent", "-"), calibration)
    tolerance = intent["models"][0]["tolerances"]["outputs"]["save_infer_model/scale_0.tmp_1"]["consistency"]
    assert tolerance["min_cosine"] == entry.proposed_min_cosine < entry.cosine  # headroom below the worst run
    (tmp_path / "baseline.toml").write_text(tomli_w.dumps(intent))
    lock_project(project, strict=True)

    for _ in range(2):
        assert not_passed(project) == []

    swapped_classifier_rows(tmp_path / "cls.onnx", tmp_path / "cls.onnx")
    failures = not_passed(project)
    task = next(line for line in failures if line.startswith("task rknn-sim/rk3588"))
    # the swap reverses every sample's decision: the first line names sample 0 and both classes
    assert "sample 0: top-1 changed from class " in task and "top-1 agreement 0.00 < 1.00" in task, failures
    assert "'0°'" in task and "'180°'" in task
