"""Accuracy against labels on the rk3588 simulator, fp16 and int8: the PP-OCRv4 recogniser (PyPI
`rapidocr-onnxruntime`) scored by CER on the transcripts of the three text-line fixtures. `lock`
pins every backend's and target's score, an unchanged `verify` passes, and two characters swapped in
the model's last layer (the battery's CTC fault) fail the `labels` gate on every backend.

One model, a 12 s build per target: the YOLOv8n DocLayNet by mAP (fp16, w8a8, hybrid w8a8; numbers
in docs/tasks.md) takes minutes per hybrid build, and is tested on onnxruntime in tests/test_labels.py.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from baseline.locker import lock_project
from baseline.models.results import GateResult, Status
from baseline.project.layout import Project
from baseline.project.lockfile import load_lock
from baseline.verification.verify import VerifyOptions, verify_project
from tests.tasks.conftest import IMAGES, PPOCR_REC, pypi_onnx

pytestmark = pytest.mark.toolkit  # every test here drives the real toolkit

REPO = Path(__file__).resolve().parents[2]
INTENT = """\
[defaults]
backends = ["onnxruntime", "rknn-sim"]
toolkit = { version = "2.5.0", timeout = 900 }

[[models]]
name = "rec"
onnx = "rec.onnx"
calibration = { path = "images/text_lines" }
fixtures = { images = { path = "images/lines.txt", resize = "letterbox", pad = 128 } }
targets = ["rk3588", { name = "rk3588-w8a8", platform = "rk3588", quantization = { dtype = "w8a8" } }]

[models.conversion.config]
mean_values = [[127.5, 127.5, 127.5]]
std_values = [[127.5, 127.5, 127.5]]

[models.conversion.load_onnx]
inputs = ["x"]
input_size_list = [[1, 3, 48, 320]]

[[models.tasks]]
kind = "ctc"
output = "softmax_11.tmp_0"
alphabet_file = "keys.txt"
space_char = true

[models.tasks.golden_quantized]
max_cer = 0.25
require_equal_text = false

[models.tasks.labels]
path = "labels/text_lines.toml"
max_loss = { cer = 0.02 }
"""


def labels_results(project: Project) -> dict[str, GateResult]:
    report = verify_project(project, options=VerifyOptions(use_cache=False))
    return {r.where: r for r in report.results if r.gate == "labels"}


def test_fp16_and_int8_cer_is_locked_and_a_fault_that_costs_it_fails(tmp_path: Path) -> None:
    shutil.copyfile(pypi_onnx(*PPOCR_REC), tmp_path / "rec.onnx")
    shutil.copyfile(REPO / "bench" / "battery" / "ppocr_keys_v1.txt", tmp_path / "keys.txt")
    images = tmp_path / "images"
    shutil.copytree(IMAGES / "text_lines", images / "text_lines")
    shutil.copyfile(IMAGES / "word_joint.png", images / "word_joint.png")
    lines = "word_joint.png\ntext_lines/sheet_product_code.png\ntext_lines/receipt_street.png\n"
    (images / "lines.txt").write_text(lines)
    shutil.copytree(REPO / "fixtures" / "labels", tmp_path / "labels")
    (tmp_path / "baseline.toml").write_text(INTENT)
    project = Project.locate(tmp_path / "baseline.lock", root=tmp_path)
    lock_project(project)

    model = load_lock(project.lock_path).model("rec")
    assert model is not None
    scores = {score.where: score.metrics["cer"] for score in model.label_scores}
    # measured 2026-11 (toolkit 2.5.0): onnxruntime and fp16 read all three lines right; w8a8
    # misreads 2 of their 37 characters (CER 0.054)
    assert scores["onnxruntime"] == 0.0 and scores["rknn-sim/rk3588"] == 0.0
    assert 0 < scores["rknn-sim/rk3588-w8a8"] < 0.15

    unchanged = labels_results(project)
    assert sorted(unchanged) == ["onnxruntime", "rknn-sim/rk3588", "rknn-sim/rk3588-w8a8"]
    assert all(r.status == Status.PASS for r in unchanged.values()), unchanged

    sys.path.insert(0, str(REPO / "bench"))
    try:
        from faults import swapped_ctc_rows
    finally:
        sys.path.remove(str(REPO / "bench"))
    keys = (tmp_path / "keys.txt").read_text(encoding="utf-8").split("\n")
    swapped_ctc_rows(tmp_path / "rec.onnx", keys.index("e") + 1, keys.index("t") + 1)  # 'e' reads 't'
    faulty = labels_results(project)
    assert all(r.status == Status.FAIL for r in faulty.values()), {n: r.summary for n, r in faulty.items()}
    summary = faulty["rknn-sim/rk3588-w8a8"].summary
    assert "tasks[0] CER" in summary and "allowed 0.02" in summary and "over 3 labelled sample(s)" in summary
