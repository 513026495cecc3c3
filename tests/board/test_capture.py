"""The Lite2 capture round trip: bundle → board (a stand-in RKNNLite) → verified like any backend."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LOCK, tensor_file

pytestmark = pytest.mark.toolkit  # every test here drives the real toolkit

FAKE_LITE = Path(__file__).with_name("fake_lite")


def run_on_board(bundle: Path, board_outputs: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(FAKE_LITE), "FAKE_LITE_OUTPUTS": str(board_outputs)}
    subprocess.run([sys.executable, "capture.py"], cwd=bundle, env=env, check=True, capture_output=True)


def enable_rknnlite(demo: Path) -> None:
    intent = demo / "lockfiles/demo/baseline.toml"
    text = intent.read_text().replace(
        'name = "detector"\n', 'name = "detector"\nbackends = ["onnxruntime", "rknn-sim", "rknnlite"]\n'
    )
    intent.write_text(text)


def results(cli, demo: Path) -> dict[tuple[str, str], Any]:
    code, out, _ = cli(demo, "verify", "--lock", str(LOCK), "--model", "detector", "--format", "json")
    return {(r["gate"], r["backend"]): r for r in json.loads(out)["results"]} | {("exit", ""): code}


def test_board_capture_is_verified_like_any_backend(demo: Path, cli) -> None:
    code, out, _ = cli(demo, "capture", "--lock", str(LOCK), "--model", "detector", "--target", "rk3588")
    assert code == 0 and "adb push" in out
    bundle = demo / "captures/detector/rk3588"
    assert sorted(p.name for p in bundle.iterdir()) == [
        "capture.py",
        "inputs.npz",
        "model.rknn",
        "request.json",
    ]
    # the board's outputs: what the simulator produced for the same .rknn
    run_on_board(bundle, tensor_file(demo, "detector", "outputs.rknn-sim.rk3588"))
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["sdk_version"].startswith("API: 2.3.0")
    enable_rknnlite(demo)
    assert cli(demo, "lock", "--lock", str(LOCK))[0] == 0
    by_gate = results(cli, demo)
    assert by_gate[("exit", "")] == 0
    assert by_gate[("consistency", "rknnlite")]["status"] == "pass"
    assert by_gate[("drift", "rknnlite")]["status"] == "pass"


def test_capture_of_another_model_is_refused(demo: Path, cli) -> None:
    cli(demo, "capture", "--lock", str(LOCK), "--model", "detector", "--target", "rk3588")
    bundle = demo / "captures/detector/rk3588"
    run_on_board(bundle, tensor_file(demo, "detector", "outputs.rknn-sim.rk3588"))
    enable_rknnlite(demo)
    assert cli(demo, "lock", "--lock", str(LOCK))[0] == 0
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["model_sha256"] = "0" * 64
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    by_gate = results(cli, demo)
    assert by_gate[("exit", "")] == 1
    consistency = by_gate[("consistency", "rknnlite")]
    assert consistency["status"] == "error" and "different .rknn" in consistency["summary"]


def test_capture_for_an_unbuilt_target_is_a_clear_error(demo: Path, cli) -> None:
    code, _, err = cli(demo, "capture", "--lock", str(LOCK), "--model", "nms_head", "--target", "rk3588")
    assert code == 2 and "has no .rknn for target 'rk3588'" in err
