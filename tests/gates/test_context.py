"""What gates share in one verification: each backend run once, and the statistics the drift gate
compares computed once, on another thread, from the moment a run with a locked reference arrives.
The project runs onnxruntime only, so no test here needs the toolkit."""

from __future__ import annotations

import threading
from pathlib import Path

import onnx
import pytest

from baseline.errors import InputError
from baseline.gates import GateJob, run_gate
from baseline.gates.context import VerifyContext
from baseline.locker import lock_project
from baseline.models.results import Status
from baseline.project.layout import Project
from baseline.project.lockfile import load_lock
from baseline.tasks import parts
from tests.test_limits import INTENT, loop_model


@pytest.fixture
def locked(tmp_path: Path) -> VerifyContext:
    (tmp_path / "models").mkdir()
    onnx.save(loop_model(3), tmp_path / "models" / "looper.onnx")
    (tmp_path / "baseline.toml").write_text(INTENT.format(limit=60))
    project = Project.locate(tmp_path / "baseline.lock")
    lock_project(project)
    return VerifyContext(project=project, lock=load_lock(project.lock_path))


def test_statistics_of_large_outputs_start_with_the_run_on_their_own_thread_and_are_computed_once(
    locked: VerifyContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    from baseline.gates import context

    monkeypatch.setattr(context, "STATS_THREAD_BYTES", 1)  # the model's outputs count as large
    threads: list[str] = []
    started, release = threading.Event(), threading.Event()
    real = parts.stats_with_parts

    def recorded(*args, **kwargs):
        threads.append(threading.current_thread().name)
        started.set()
        release.wait(30)  # still computing while the caller goes on
        return real(*args, **kwargs)

    monkeypatch.setattr(parts, "stats_with_parts", recorded)
    model = locked.lock.model("looper")
    assert model is not None and model.reference("onnxruntime", None) is not None
    run = locked.run(model, "onnxruntime", None)
    assert run.outputs is not None
    assert started.wait(30) and threads == ["baseline-stats"]  # started by the run, before anyone asked
    release.set()
    stats = locked.output_stats(model, "onnxruntime", None)
    assert stats == real(model.parts, run.outputs, skip_unfit=True) and [s.name for s in stats] == ["y"]
    assert locked.output_stats(model, "onnxruntime", None) is stats and len(threads) == 1


def test_statistics_of_small_outputs_are_computed_when_asked_in_the_asking_thread_once(
    locked: VerifyContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread per run cost more than a classifier's statistics (and, two jobs on two cores,
    waited behind the other job's process): small outputs get theirs where they are read."""
    threads: list[str] = []
    real = parts.stats_with_parts

    def recorded(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(parts, "stats_with_parts", recorded)
    model = locked.lock.model("looper")
    assert model is not None
    run = locked.run(model, "onnxruntime", None)
    assert run.outputs is not None and sum(a.nbytes for a in run.outputs.values()) < 256 * 1024
    assert threads == [], "nothing computed before it is asked for"
    stats = locked.output_stats(model, "onnxruntime", None)
    assert threads == [threading.current_thread().name]
    assert stats == real(model.parts, run.outputs, skip_unfit=True)
    assert locked.output_stats(model, "onnxruntime", None) is stats and len(threads) == 1


def test_statistics_that_fail_fail_the_drift_check_as_before(
    locked: VerifyContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args, **kwargs):
        raise InputError("part 'p': no output 'z'")

    monkeypatch.setattr(parts, "stats_with_parts", broken)
    model = locked.lock.model("looper")
    assert model is not None
    result = run_gate(model, GateJob("drift", backend="onnxruntime"), locked)
    assert result.status is Status.ERROR and "no output 'z'" in result.summary


def test_a_changed_model_that_no_longer_runs_says_the_change_is_the_cause(locked: VerifyContext) -> None:
    # found on CenterFace: a zeroed head conv made the toolkit drop that output, and the rows that
    # could not run said only "no outputs: ..." while every other row said accept or revert
    graph = loop_model(3).graph
    graph.input[0].type.tensor_type.shape.dim[1].dim_value = 5  # the locked fixtures no longer fit
    graph.output[0].type.tensor_type.shape.dim[1].dim_value = 5
    graph.node[0].attribute[0].g.input[2].type.tensor_type.shape.dim[1].dim_value = 5
    graph.node[0].attribute[0].g.output[1].type.tensor_type.shape.dim[1].dim_value = 5
    onnx.save(
        onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)], ir_version=8),
        locked.project.root / "models" / "looper.onnx",
    )
    model = locked.lock.model("looper")
    assert model is not None
    for gate in ("drift", "consistency"):
        result = run_gate(model, GateJob(gate, backend="onnxruntime"), locked)
        assert result.status is Status.ERROR and result.summary.startswith("no outputs"), result.summary
        assert result.hint is not None and "`baseline accept looper" in result.hint, gate
