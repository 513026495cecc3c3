"""Issue 14, items 5 and 8: an ONNX graph cannot hang CI, and a stopped verify leaves nothing.

The hostile model is a Loop whose trip count is 2**62: onnxruntime never returns from it. The
projects here run onnxruntime only, so no test needs the toolkit.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from baseline.isolated import HELPERS, TimeLimitExceeded, run_limited
from baseline.locker import lock_project
from baseline.models.results import Status
from baseline.project import Project
from baseline.verify import VerifyOptions, verify_project
from tests.test_trust import assert_refused

FOREVER = 2**62
INTENT = """
[defaults]
backends = ["onnxruntime"]
toolkit = {{ onnx_timeout = {limit} }}

[[models]]
name = "looper"
onnx = "models/looper.onnx"
"""


def loop_model(trips: int) -> onnx.ModelProto:
    """y = x + trips, computed by a Loop adding one per iteration."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Add", ["v_in", "one"], ["v_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [1, 4]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [1, 4]),
        ],
        [helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["trips", "keep_going", "x"], ["y"], body=body)],
        "looper",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [
            helper.make_tensor("trips", TensorProto.INT64, [], [trips]),
            helper.make_tensor("keep_going", TensorProto.BOOL, [], [True]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def looper_project(root: Path, limit: float = 3.0) -> Project:
    """A locked onnxruntime-only project whose model is then swapped for one that never ends."""
    (root / "models").mkdir(parents=True)
    onnx.save(loop_model(3), root / "models" / "looper.onnx")
    (root / "baseline.toml").write_text(INTENT.format(limit=limit))
    project = Project.locate(root / "baseline.lock")
    lock_project(project)
    onnx.save(loop_model(FOREVER), root / "models" / "looper.onnx")
    return project


def test_check_of_a_model_that_never_ends_is_one_line_error(tmp_path: Path, cli) -> None:
    onnx.save(loop_model(FOREVER), tmp_path / "looper.onnx")
    started = time.monotonic()
    code, out, err = cli(tmp_path, "check", "looper.onnx", "--timeout", "2")
    assert time.monotonic() - started < 30
    assert_refused(code, out, err, "looper.onnx", "did not finish within 2 s", "--timeout")


def test_check_of_a_loop_that_ends_still_gets_its_verdict(tmp_path: Path, cli) -> None:
    onnx.save(loop_model(3), tmp_path / "looper.onnx")
    code, out, _ = cli(tmp_path, "check", "looper.onnx")
    assert code == 1, out  # RKNN has no control flow: a verdict, not a time-out
    assert "looper.onnx: 1 nodes, predicted NOT to compile" in out


def test_static_gate_and_golden_run_are_stopped_at_the_limit(tmp_path: Path) -> None:
    project = looper_project(tmp_path)
    started = time.monotonic()
    report = verify_project(project, options=VerifyOptions(use_cache=False))
    assert time.monotonic() - started < 60
    by_gate = {(r.gate, r.backend): r for r in report.results}
    static = by_gate[("static", None)]
    assert static.status is Status.ERROR, static
    assert "model 'looper': the static check did not finish within 3 s" in static.summary
    assert "toolkit.onnx_timeout" in static.summary
    golden = by_gate[("consistency", "onnxruntime")]
    assert golden.status is Status.ERROR, golden
    assert "model 'looper': onnxruntime did not finish within 3 s" in golden.summary


def test_a_lock_only_change_of_the_onnx_limit_is_refused(tmp_path: Path, cli) -> None:
    looper_project(tmp_path)
    lock = tmp_path / "baseline.lock"
    text = lock.read_text()
    assert "onnx_timeout = 3" in text
    lock.write_text(text.replace("onnx_timeout = 3", "onnx_timeout = 30000"))
    code, out, err = cli(tmp_path, "verify", "--no-cache")
    assert_refused(code, out, err, "models.looper.toolkit differs")


def test_one_helper_serves_many_calls(tmp_path: Path) -> None:
    HELPERS.close()
    pids = {run_limited(os.getpid, (), 30, "pid", "") for _ in range(5)}
    assert len(pids) == 1 and os.getpid() not in pids


def test_a_killed_helper_is_replaced_on_the_next_call() -> None:
    with pytest.raises(TimeLimitExceeded, match="sleep did not finish within 0.5 s"):
        run_limited(time.sleep, (60,), 0.5, "sleep", "wait less")
    assert run_limited(sum, ([1, 2],), 30, "sum", "") == 3


def test_errors_raised_in_the_helper_come_back_as_themselves() -> None:
    with pytest.raises(ZeroDivisionError):
        run_limited(divmod, (1, 0), 30, "divide", "")
    assert run_limited(np.add, (1, 2), 30, "add", "") == 3
