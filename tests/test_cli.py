"""The lock → change → verify loop through the CLI, as a user meets it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import LOCK, retrain, tensor_file

LOCK_ARGS = ("--lock", str(LOCK))


@pytest.mark.toolkit
def test_demo_verifies_clean(demo: Path, cli) -> None:
    code, out, _ = cli(demo, "verify", *LOCK_ARGS)
    assert code == 0, out
    assert "PASSED" in out
    assert "XFAIL   nms_head" in out and "NonMaxSuppression" in out


@pytest.mark.toolkit
def test_json_report_has_the_documented_shape(demo: Path, cli) -> None:
    code, out, _ = cli(demo, "verify", *LOCK_ARGS, "--format", "json")
    report = json.loads(out)
    assert code == 0 and report["passed"] is True
    gates = {(r["model"], r["gate"], r["status"]) for r in report["results"]}
    assert ("classifier", "drift", "pass") in gates
    assert ("nms_head", "static", "xfail") in gates
    for result in report["results"]:
        assert set(result) >= {"model", "target", "gate", "status", "summary", "metrics"}


@pytest.mark.toolkit
def test_flipped_byte_in_model_fails_integrity_naming_the_file(demo: Path, cli) -> None:
    model = demo / "fixtures/demo/detector.onnx"
    data = bytearray(model.read_bytes())
    data[-5] ^= 0xFF  # inside the last initializer: still a valid model
    model.write_bytes(bytes(data))
    code, out, _ = cli(demo, "verify", *LOCK_ARGS, "--format", "json")
    report = json.loads(out)
    assert code == 1
    failed = [r for r in report["results"] if r["status"] == "fail"]
    assert any(r["gate"] == "integrity" and "fixtures/demo/detector.onnx" in r["summary"] for r in failed)
    assert all(r["model"] == "detector" for r in failed)


@pytest.mark.toolkit
def test_flipped_byte_in_fixture_fails_integrity(demo: Path, cli) -> None:
    fixture = tensor_file(demo, "classifier", "inputs")
    data = bytearray(fixture.read_bytes())
    data[len(data) // 2] ^= 0x01
    fixture.write_bytes(bytes(data))
    code, out, _ = cli(demo, "verify", *LOCK_ARGS)
    assert code == 1
    assert "FAIL    classifier  integrity" in out
    assert fixture.relative_to(demo).as_posix() in out


@pytest.mark.toolkit
def test_perturbed_weights_fail_drift_with_numbers(demo: Path, cli) -> None:
    retrain(demo)
    code, out, _ = cli(demo, "verify", *LOCK_ARGS, "--format", "json", "--model", "classifier")
    report = json.loads(out)
    assert code == 1
    drift = next(r for r in report["results"] if r["gate"] == "drift")
    assert drift["status"] == "fail"
    line = drift["details"][0]
    assert "output 'logits'" in line and "baseline" in line and "→" in line and "allowed" in line
    assert drift["metrics"]["outputs"]["logits"]["worst_ratio"] > 1


@pytest.mark.toolkit
def test_lock_twice_is_byte_identical(demo: Path, cli) -> None:
    lock_path = demo / LOCK
    before = lock_path.read_bytes()
    code, out, _ = cli(demo, "lock", *LOCK_ARGS)
    assert code == 0 and "unchanged" in out
    assert lock_path.read_bytes() == before


@pytest.mark.toolkit
def test_unknown_schema_version_exits_2_in_one_line(demo: Path, cli) -> None:
    lock_path = demo / LOCK
    lock_path.write_text(lock_path.read_text().replace("schema_version = 1", "schema_version = 99"))
    code, _, err = cli(demo, "verify", *LOCK_ARGS)
    assert code == 2
    assert "schema version 99 is newer" in err and err.count("\n") == 1


@pytest.mark.toolkit
def test_malformed_toml_exits_2(demo: Path, cli) -> None:
    (demo / LOCK).write_text("schema_version = [\n")
    code, _, err = cli(demo, "verify", *LOCK_ARGS)
    assert code == 2 and "not valid TOML" in err and "baseline.lock" in err


@pytest.mark.toolkit
def test_missing_file_exits_2_naming_it(demo: Path, cli) -> None:
    missing = tensor_file(demo, "detector", "outputs.onnxruntime")
    missing.unlink()
    code, _, err = cli(demo, "verify", *LOCK_ARGS)
    assert code == 2
    assert f"{missing.relative_to(demo).as_posix()} is missing" in err and "models.detector" in err


@pytest.mark.toolkit
def test_edited_intent_makes_the_lock_stale(demo: Path, cli) -> None:
    intent = demo / "lockfiles/demo/baseline.toml"
    intent.write_text(intent.read_text().replace("rtol = 1e-3", "rtol = 2e-3"))
    code, _, err = cli(demo, "verify", *LOCK_ARGS)
    assert code == 2 and "lock is stale" in err and "baseline lock" in err


@pytest.mark.toolkit
def test_intent_comments_do_not_make_the_lock_stale(demo: Path, cli) -> None:
    intent = demo / "lockfiles/demo/baseline.toml"
    intent.write_text("# a new comment\n" + intent.read_text())
    assert cli(demo, "verify", *LOCK_ARGS)[0] == 0


@pytest.mark.toolkit
def test_unknown_model_exits_2(demo: Path, cli) -> None:
    code, _, err = cli(demo, "verify", *LOCK_ARGS, "--model", "resnet")
    assert code == 2 and "no model named 'resnet'" in err


def test_help_does_not_import_heavy_modules() -> None:
    probe = (
        "import sys; from typer.testing import CliRunner; from baseline.cli import app; "
        "CliRunner().invoke(app, ['--help']); "
        "print(sorted(m for m in ('onnx', 'onnxruntime', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.toolkit
def test_entry_point_runs(demo: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "baseline", "verify", *LOCK_ARGS],
        cwd=demo,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_full_disk_names_the_folder_that_is_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that fails for want of space names no file; the line says which folder is full."""
    import errno
    import shutil
    import tempfile
    from collections import namedtuple

    from baseline.cli import boundary

    usage = namedtuple("usage", "total used free")
    full = tmp_path / "tmp"
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(full))
    # only the temporary folder is full, wherever the suite runs (the wheel session's checkout is
    # itself under /tmp)
    monkeypatch.setattr(
        shutil, "disk_usage", lambda path: usage(1 << 30, 1 << 30, 0 if Path(path) == full else 1 << 30)
    )
    line = boundary.one_line(OSError(errno.ENOSPC, "No space left on device"))
    assert line == (
        f"no space left on the disk of the temporary folder {tmp_path / 'tmp'} (No space left on device); "
        "free space there, or point TMPDIR at a larger disk"
    )
    assert (
        boundary.one_line(OSError(errno.EACCES, "Permission denied", "x.lock")) == "x.lock: Permission denied"
    )
