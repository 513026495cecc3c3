"""An edit to how results are judged re-judges the runs kept for the same inputs: no conversion.

Tolerances, task thresholds, parts and `expect_fail` decide how a run is judged, not what it
measures; the backend runs are kept by what they read (`baseline.verification.runcache`). Counted here: the
backend runs each command starts and the toolkit workers it asks for (a run kept, or the toolkit's
per-layer analysis kept beside it, needs none), on the demo project with the real toolkit."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from baseline.backends.base import Backend
from baseline.files.rknn_file import read_rknn
from baseline.locker import measure
from baseline.project.lockfile import load_lock
from tests.conftest import LOCK

pytestmark = pytest.mark.toolkit

LOCK_ARGS = ("--lock", str(LOCK))
CLI = Callable[..., tuple[int, str, str]]


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every backend run started, as `backend target` (a conversion and simulator run per rknn-sim)."""
    runs: list[str] = []
    real = Backend.run

    def counting(self: Backend, job: Any) -> Any:
        runs.append(f"{self.name} {job.target_name or 'host'}")
        return real(self, job)

    monkeypatch.setattr(Backend, "run", counting)
    return runs


@pytest.fixture
def launched(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every toolkit worker asked to start (ahead of the jobs, or by a job), by toolkit version."""
    from baseline.toolchain.client import ToolkitWorker

    asked: list[str] = []
    real = ToolkitWorker.launch

    def counting(self: ToolkitWorker) -> None:
        asked.append(self.toolchain.version)
        real(self)

    monkeypatch.setattr(ToolkitWorker, "launch", counting)
    return asked


def edit_intent(root: Path, old: str, new: str) -> None:
    intent = root / LOCK.with_suffix(".toml")
    text = intent.read_text()
    assert old in text
    intent.write_text(text.replace(old, new, 1))


def test_a_tolerance_edit_converts_nothing_in_lock_verify_check_and_accept(
    demo: Path, cli: CLI, started: list[str], launched: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli(demo, "lock", *LOCK_ARGS)[0] == 0  # measures once more, keeping every run
    started.clear()
    launched.clear()
    edit_intent(demo, "atol = 1e-6   # probabilities", "atol = 2e-6   # probabilities")
    read = Counter[Path]()
    real_read = read_rknn

    def counted_read(path: Path) -> Any:
        read[path] += 1
        return real_read(path)

    monkeypatch.setattr(measure, "read_rknn", counted_read)
    code, out, err = cli(demo, "lock", *LOCK_ARGS)
    assert code == 0, out + err
    # each pinned build is parsed at most once for its fingerprint (it was 4 times: 2 measurements,
    # each asking whether the kept run serves and which bytes to pin)
    assert max(read.values(), default=0) <= 1, read
    classifier = load_lock(demo / LOCK).model("classifier")
    assert classifier is not None and classifier.tolerances["probs"].drift.atol == 2e-6
    code, out, _ = cli(demo, "verify", *LOCK_ARGS, "--format", "json")
    assert code == 0 and json.loads(out)["results"]
    assert cli(demo, "lock", "--check", *LOCK_ARGS)[0] == 0
    code, out, err = cli(demo, "accept", "classifier", "--reason", "tighter drift", *LOCK_ARGS)
    assert code == 0, out + err
    assert started == [], "a judging edit re-judged the kept runs; nothing ran again"
    # nor was a toolkit process started ahead for runs that were kept (its import: ~1.5 s CPU)
    assert launched == [], launched


def test_a_conversion_edit_runs_only_the_target_it_changes(demo: Path, cli: CLI, started: list[str]) -> None:
    assert cli(demo, "lock", *LOCK_ARGS)[0] == 0
    started.clear()
    edit_intent(demo, 'algorithm = "normal"', 'algorithm = "mmse"')
    code, out, err = cli(demo, "lock", *LOCK_ARGS)
    assert code == 0, out + err
    # lock's two measurements of the one changed build; the fp16 build and onnxruntime were kept
    assert started == ["rknn-sim rk3588-w8a8", "rknn-sim rk3588-w8a8"]
    started.clear()
    code, out, err = cli(demo, "lock", *LOCK_ARGS, "--no-cache")
    assert code == 0, out + err
    assert len(started) > 4, "--no-cache measures every run again"


def test_a_changed_model_is_run_again_not_answered_from_a_kept_run(demo: Path, cli: CLI) -> None:
    """The run's key reads the ONNX file as it is: an edited model (not relocked) is converted and
    run again, and the gates judge what it outputs now."""
    import onnx
    from onnx import numpy_helper

    assert cli(demo, "verify", *LOCK_ARGS)[0] == 0  # every run kept
    path = demo / "fixtures" / "demo" / "classifier.onnx"
    model = onnx.load(str(path))
    weight = next(init for init in model.graph.initializer if init.name == "conv1.weight")
    weight.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(weight) * -1.0, weight.name))
    onnx.save(model, str(path))
    code, out, _ = cli(demo, "verify", *LOCK_ARGS, "--model", "classifier", "--format", "json")
    failing = {(r["gate"], r["backend"]) for r in json.loads(out)["results"] if r["status"] == "fail"}
    assert code == 1 and ("consistency", "onnxruntime") in failing, failing
