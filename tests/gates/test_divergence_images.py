"""The first divergent layer of a failing comparison is found with image fixtures too: the
toolkit's `accuracy_analysis` takes `.npy` inputs in the ONNX layout, not the board's NHWC pixels."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

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
