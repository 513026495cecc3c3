"""Issue 33: `check` learns from this machine's real conversions (`static_check.conversions`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
from onnx import TensorProto, helper

from baseline.backends.base import BackendJob, BackendRun, BuildReport
from baseline.models.intent import QuantizationSpec, TargetSpec, ToolkitSettings
from baseline.static_check import check_model, conversions
from baseline.static_check.conversions import FILE_NAME, read_entries, record_conversion
from baseline.verification.runcache import RunCache
from tests.conftest import LOCK
from tests.test_static_check_rules import model


def not_model(tmp_path: Path) -> Path:
    """A float input cast to int16, a Cast no model measured, so `check` says unknown on rv1106.
    (A bool Or alone was the example until a graph with no float tensor became a measured
    failure there: quantized-integer-only.)"""
    return model(
        tmp_path,
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT16)],
        {"x": [1, 8]},
        output_type=TensorProto.INT16,
    )


def relu_model(tmp_path: Path) -> Path:
    return model(tmp_path, [helper.make_node("Relu", ["x"], ["y"])], {"x": [1, 8]}, name="relu.onnx")


def job(path: Path, platform: str = "rv1106", quantized: bool = True) -> BackendJob:
    target = TargetSpec(
        name=platform, platform=platform, quantization=QuantizationSpec() if quantized else None
    )
    inputs = {"x": np.zeros((1, 1, 8), np.float32)}
    return BackendJob("m", path, inputs, ["y"], target=target, toolkit=ToolkitSettings())


def build(compiled: bool, error: str | None = None, crashed: bool = False) -> BackendRun:
    report = BuildReport(
        compiled=compiled,
        stage="done" if compiled else "build",
        error=error,
        diagnostics=[],
        log_tail=[],
        seconds={},
        crashed=crashed,
    )
    return BackendRun(outputs=None, build=report)


def test_a_conversion_that_compiled_changes_the_next_check(tmp_path: Path) -> None:
    path, root = not_model(tmp_path), tmp_path / "cache"
    before = check_model(path, target="rv1106", learned_root=root)
    assert before.verdict == "unknown" and before.learned_from == []
    record_conversion(root, job(path), build(compiled=True))
    after = check_model(path, target="rv1106", learned_root=root)
    assert after.verdict == "compiles" and after.learned_from == ["m"]
    assert [f.rule for f in after.findings] == ["learned-compiled"]
    # the evidence is per toolkit, platform and precision: rk3566 learned nothing
    assert check_model(path, target="rk3566", learned_root=root).learned_from == []


def test_a_refusal_whose_log_names_a_node_changes_the_next_check(tmp_path: Path) -> None:
    path, root = relu_model(tmp_path), tmp_path / "cache"
    assert check_model(path, learned_root=root).verdict == "compiles"
    record_conversion(root, job(path, "rk3588", False), build(False, "KeyError: 'y_mm'"))
    (entry,) = read_entries(root)
    assert not entry.compiled and entry.failing_node == "y" and entry.signatures == ()
    after = check_model(path, learned_root=root)
    assert after.verdict == "fails" and [f.rule for f in after.errors()] == ["learned-refused"]
    # a crash names no node, whatever its log printed last
    record_conversion(root, job(path, "rk3588", False), build(False, "KeyError: 'y_mm'", crashed=True))
    assert (
        read_entries(root)[-1].failing_node == ""
        and check_model(path, learned_root=root).verdict == "compiles"
    )
    record_conversion(root, job(path, "rk3588", False), build(False, "KeyError: 'y_mm'"))
    # a refusal that names no node teaches nothing about nodes
    record_conversion(root, job(path, "rk3588", False), build(False, "build returned -1"))
    assert check_model(path, learned_root=root).verdict == "compiles"


def test_the_run_cache_records_every_fresh_conversion_and_never_fails_it(tmp_path: Path) -> None:
    path, root = not_model(tmp_path), tmp_path / "cache"
    runs = RunCache(root / "runs", cast(Any, None), cast(Any, None))
    run = runs.kept_or_run(None, lambda: build(compiled=True), lambda _: True, job(path))
    assert run.build is not None and [e.model for e in read_entries(root)] == ["m"]
    # a hang says nothing; a missing file or an unwritable cache never raises
    runs.kept_or_run(
        None, lambda: build(False, "the conversion timed out", crashed=True), lambda _: True, job(path)
    )
    assert len(read_entries(root)) == 1
    record_conversion(root, job(tmp_path / "gone.onnx"), build(compiled=True))
    (tmp_path / "file").write_text("")
    record_conversion(tmp_path / "file" / "cache", job(path), build(compiled=True))


def test_a_tampered_table_is_validated_entry_by_entry(tmp_path: Path) -> None:
    path, root = not_model(tmp_path), tmp_path / "cache"
    record_conversion(root, job(path), build(compiled=True))
    document = json.loads((root / FILE_NAME).read_text())
    good = document["entries"][0]
    document["entries"] = [
        {**good, "compiled": "yes"},  # a string where a bool belongs
        {**good, "signatures": ["Not:not-hex"]},
        {**good, "onnx": "../../etc/passwd"},
        {**good, "signatures": "Not:0123456789abcdef"},
        "garbage",
        {**good, "model": "kept"},
    ]
    (root / FILE_NAME).write_text(json.dumps(document))
    assert [e.model for e in read_entries(root)] == ["kept"]
    assert check_model(path, target="rv1106", learned_root=root).learned_from == ["kept"]
    (root / FILE_NAME).write_text("{not json")
    assert (
        read_entries(root) == []
        and check_model(path, target="rv1106", learned_root=root).verdict == "unknown"
    )


def test_the_table_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conversions, "MAX_ENTRIES", 3)  # here: the reader keeps the newest 3
    root = tmp_path / "cache"
    for index in range(5):
        folder = tmp_path / str(index)
        folder.mkdir()
        path = model(folder, [helper.make_node("Relu", ["x"], ["y"])], {"x": [1, index + 1]})
        record_conversion(root, job(path, "rk3588", False), build(compiled=True))
    assert len(read_entries(root)) == 3
    # the writer keeps the file under the size the reader accepts, dropping the oldest
    size = (root / FILE_NAME).stat().st_size
    newest = dataclasses.replace(read_entries(root)[-1], platform="rk3566")
    monkeypatch.setattr(conversions, "MAX_BYTES", size - 1)  # in this process: write_entry directly
    conversions.write_entry(root, newest)
    assert (root / FILE_NAME).stat().st_size < size
    assert read_entries(root)[-1] == newest and len(read_entries(root)) < 3
    monkeypatch.setattr(conversions, "MAX_BYTES", 10)
    assert read_entries(root) == []  # a table grown past the limit (written by hand) is not read


def test_cli_check_says_when_a_verdict_comes_from_this_machine(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    monkeypatch.delenv("BASELINE_CACHE", raising=False)
    path = not_model(tmp_path)
    code, out, _ = cli(tmp_path, "check", path.name, "--target", "rv1106", "--quantized")
    assert code == 1 and "verdict unknown" in out
    record_conversion(tmp_path / ".baseline-cache", job(path), build(compiled=True))
    code, out, _ = cli(tmp_path, "check", path.name, "--target", "rv1106", "--quantized")
    assert code == 0 and "judged by this machine's own conversions (of m)" in " ".join(out.split())


@pytest.mark.toolkit
def test_real_conversions_of_verify_are_learned_by_check(
    demo: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """verify --no-cache converts again with the real toolkit; each conversion is recorded."""
    monkeypatch.delenv("BASELINE_CACHE", raising=False)
    lock = ("--lock", str(LOCK))
    code, out, err = cli(demo, "verify", *lock, "--no-cache", "--model", "nms_head", "--model", "overflow")
    assert code == 0, out + err
    entries = {entry.model: entry for entry in read_entries(demo / ".baseline-cache")}
    assert entries["overflow"].compiled and entries["overflow"].signatures
    refused = entries["nms_head"]
    assert not refused.compiled and refused.signatures == () and refused.error
    code, out, _ = cli(demo, "check", "fixtures/demo/overflow.onnx", "--target", "rk3588")
    assert code == 0 and "this machine's own conversions (of overflow)" in " ".join(out.split())
    if refused.failing_node:  # the toolkit's message named the node: check now cites it
        _, out, _ = cli(demo, "check", "fixtures/demo/nms_head.onnx", "--target", "rk3588")
        assert "learned-refused" in out
