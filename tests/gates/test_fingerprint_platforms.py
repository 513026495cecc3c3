"""Issue 13, item 3: a fresh lock is green and stays byte-stable on every platform (real toolkit)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from baseline.project.lockfile import load_lock
from tests.conftest import REPO

pytestmark = pytest.mark.toolkit  # every test here drives the real toolkit

TARGETS = """targets = [
    "rk3566", "rk3568", "rk3576", "rk3588",
    { name = "rv1106-w8a8", platform = "rv1106", quantization = { dtype = "w8a8", algorithm = "normal" } },
]"""
INTENT = f"""[project]
tensors = "tensors"

[defaults]
backends = ["onnxruntime", "rknn-sim"]
fixtures = {{ seed = 0, samples = 1 }}
toolkit = {{ version = "2.5.0", timeout = 300 }}

[[models]]
name = "classifier"
onnx = "classifier.onnx"
{TARGETS}
"""


@pytest.fixture
def every_platform(tmp_path: Path) -> Path:
    """One small model (the demo classifier, seconds per conversion) on every platform."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'platforms'\n")
    shutil.copy2(REPO / "fixtures" / "demo" / "classifier.onnx", tmp_path / "classifier.onnx")
    (tmp_path / "baseline.toml").write_text(INTENT)
    return tmp_path


def test_lock_verify_check_twice_on_every_platform(
    every_platform: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    for _ in range(2):
        code, out, err = cli(every_platform, "lock")
        assert code == 0, out + err
        code, out, err = cli(every_platform, "verify", "--no-cache")
        assert code == 0, out + err
        assert "FAIL" not in out
        code, out, err = cli(every_platform, "lock", "--check")
        assert code == 0 and "up to date" in out, out + err
    classifier = load_lock(every_platform / "baseline.lock").model("classifier")
    assert classifier is not None
    fingerprints = {pin.target: pin.metadata.fingerprint for pin in classifier.conversions}
    assert None not in fingerprints.values(), fingerprints
    assert len(set(fingerprints.values())) == len(fingerprints), "each platform its own fingerprint"
