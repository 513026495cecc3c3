"""A real detector on real images: PP-OCRv4 det (from the rapidocr wheel), as the zoo converts it.

ImageNet mean/std inside the `.rknn`, the board fed uint8 NHWC pixels, onnxruntime fed the same
pixels normalised in NCHW; fp16 and w8a8 (calibrated on the zoo's 20 COCO images) are locked
and then verified unchanged. The measured agreement is printed for the README.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from baseline.files.tensors import load_tensors
from baseline.gates.consistency import ConsistencyMetrics
from baseline.locker import lock_project
from baseline.models.results import Status
from baseline.project.layout import Project
from baseline.verification.verify import verify_project
from tests.tasks.conftest import IMAGES, PPOCR_DET, pypi_onnx

pytestmark = pytest.mark.toolkit  # every test here drives the real toolkit

INTENT = """\
[[models]]
name = "ppocr_det"
onnx = "det.onnx"
targets = [
  { name = "rk3588", platform = "rk3588" },
  { name = "rk3588-w8a8", platform = "rk3588", quantization = { dtype = "w8a8" } },
]
calibration = { path = "images/coco" }
fixtures = { images = { path = "images/fixtures.txt", resize = "letterbox", pad = 0 } }

[models.conversion.config]
mean_values = [[123.675, 116.28, 103.53]]
std_values = [[58.395, 57.12, 57.375]]

[models.conversion.load_onnx]
inputs = ["x"]
input_size_list = [[1, 3, 480, 480]]

# measured 0.9846 for w8a8: a text detector calibrated on COCO photographs (the zoo's own
# calibration set for PP-OCR is text images), the default 0.99 asks for more than that gives
[models.tolerances.consistency_quantized]
min_cosine = 0.98
"""
FIXTURES = ["product_sheet.jpg", "receipt.jpg", "coco/000000005001.jpg", "coco/000000181542.jpg"]


def test_ppocr_det_fp16_and_w8a8_lock_then_verify(tmp_path: Path) -> None:
    shutil.copyfile(pypi_onnx(*PPOCR_DET), tmp_path / "det.onnx")
    shutil.copytree(IMAGES, tmp_path / "images")
    (tmp_path / "images" / "fixtures.txt").write_text("\n".join(FIXTURES) + "\n")
    (tmp_path / "baseline.toml").write_text(INTENT)
    project = Project.locate(tmp_path / "baseline.lock", root=tmp_path)

    lock = lock_project(project).lock
    model = lock.model("ppocr_det")
    assert model is not None and model.calibration is not None and len(model.calibration.files) == 20
    fixtures = load_tensors(project.pinned(model.fixtures, "fixtures"))
    assert fixtures["x"].dtype == np.uint8 and fixtures["x"].shape == (4, 1, 480, 480, 3)  # board's view

    report = verify_project(project)
    failed = [r for r in report.results if r.status not in (Status.PASS, Status.SKIP)]
    assert not failed, [f"{r.gate} {r.target}: {r.summary}" for r in failed]
    for result in report.results:
        if result.gate == "consistency" and isinstance(result.metrics, ConsistencyMetrics):
            for name, output in result.metrics.outputs.items():
                print(  # for the README
                    f"AGREEMENT {result.target}: {name} cosine {output.cosine:.6f} "
                    f"max_abs {output.max_abs:.4f} mean_abs {output.mean_abs:.5f} "
                    f"mismatches {output.mismatches}/{output.total}"
                )
