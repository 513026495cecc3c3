"""Issue 14, items 5 and 8: an ONNX graph cannot hang CI, and a stopped verify leaves nothing.

The hostile model is a Loop whose trip count is 2**62: onnxruntime never returns from it. The
projects here run onnxruntime only, so no test needs the toolkit.
"""

from __future__ import annotations

import operator
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from baseline.locker import lock_project
from baseline.models.results import Status
from baseline.project.layout import Project
from baseline.runtime.children import remove_orphans
from baseline.runtime.isolated import HELPERS, TimeLimitExceeded, run_limited
from baseline.verification.verify import VerifyOptions, verify_project
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


def looper_project(root: Path, limit: float = 3.0, models: int = 1) -> Project:
    """A locked onnxruntime-only project whose models are then swapped for ones that never end."""
    (root / "models").mkdir(parents=True)
    names = ["looper", *(f"looper{number}" for number in range(2, models + 1))]
    intent = INTENT.format(limit=limit)
    for name in names:
        onnx.save(loop_model(3), root / "models" / f"{name}.onnx")
        if name != "looper":
            intent += f'\n[[models]]\nname = "{name}"\nonnx = "models/{name}.onnx"\n'
    (root / "baseline.toml").write_text(intent)
    project = Project.locate(root / "baseline.lock")
    lock_project(project)
    for name in names:
        onnx.save(loop_model(FOREVER), root / "models" / f"{name}.onnx")
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


def test_replies_larger_than_the_pipe_come_back_whole_in_both_directions() -> None:
    """A reply spans hundreds of pipe buffers (a detector's stacked outputs); it is read into one
    buffer and written through a view (both copied all that was left per 64 KB before: a 64 MB
    reply took 18.8 s, now 0.3 s; see the README's Speed section). The next call still lines up."""
    payload = bytes(range(256)) * (24 << 12)  # 24 MB, every byte value, never all zeros
    assert run_limited(bytes, (payload,), 120, "echo", "") == payload
    assert run_limited(operator.add, (1, 2), 30, "add", "") == 3


def test_a_killed_helper_is_replaced_on_the_next_call() -> None:
    with pytest.raises(TimeLimitExceeded, match="sleep did not finish within 0.5 s"):
        run_limited(time.sleep, (60,), 0.5, "sleep", "wait less")
    assert run_limited(sum, ([1, 2],), 30, "sum", "") == 3


def test_hints_run_at_once_answer_nothing_and_may_fail(tmp_path: Path) -> None:
    """A hint is read as soon as it arrives (while a new helper still imports), runs without
    a reply, and one that fails leaves the calls after it answered as before."""
    HELPERS.close()
    HELPERS.hint("pathlib:Path.touch", (tmp_path / "nothing",))  # no helper running: none started
    assert not (tmp_path / "nothing").exists()
    HELPERS.prestart()
    HELPERS.hint("baseline.no_such_module:function", ())
    HELPERS.hint("pathlib:Path.touch", (tmp_path / "hinted",))
    wait_for((tmp_path / "hinted").exists, 30)
    assert run_limited(operator.add, (1, 2), 30, "add", "") == 3  # no stray reply in between
    assert run_limited(operator.mul, (2, 3), 30, "mul", "") == 6


def test_errors_raised_in_the_helper_come_back_as_themselves() -> None:
    with pytest.raises(ZeroDivisionError):
        run_limited(divmod, (1, 0), 30, "divide", "")
    assert run_limited(operator.add, (1, 2), 30, "add", "") == 3


def marked_pids(mark: str) -> list[int]:
    """Processes whose environment carries `mark` (a verify and every child it started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if f"BASELINE_TEST_MARK={mark}".encode() in environ.split(b"\0") and state != "Z":
            found.append(int(entry.name))
    return found


def start_verify(root: Path, tmp: Path, mark: str, *args: str) -> subprocess.Popen[str]:
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "BASELINE_TEST_MARK": mark}
    return subprocess.Popen(
        [sys.executable, "-m", "baseline", "verify", "--no-cache", *args],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )


def _default_sigint() -> None:
    """Ctrl-C as a terminal delivers it: a shell that starts the suite in the background (`cmd &`
    without job control) makes it ignore SIGINT, the ignoring is inherited through exec, and
    the verify under test would never see the SIGINT these tests send."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for(condition: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.1)


def assert_stopped_cleanly(verify: subprocess.Popen[str], signum: int, mark: str, tmp: Path) -> None:
    started = time.monotonic()
    verify.send_signal(signum)
    _, err = verify.communicate(timeout=30)
    assert time.monotonic() - started < 10, "verify took too long to stop"
    assert verify.returncode == 128 + signum, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        f"error: stopped by {signal.Signals(signum).name}: worker processes killed, temporary files removed"
    )
    wait_for(lambda: not marked_pids(mark), 5)  # orphans would live on: nothing else kills them
    # (onnxruntime leaves a `.ses` file of its own in TMPDIR: a file, and not per run)
    assert [path.name for path in tmp.iterdir() if path.is_dir() or path.name.startswith("baseline")] == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_verify_leaves_no_process_and_no_scratch(tmp_path: Path, signum: int) -> None:
    looper_project(tmp_path / "project", limit=600)
    mark = f"{os.getpid()}-{signum}"
    verify = start_verify(tmp_path / "project", tmp_path / "tmp", mark, "--jobs", "2")
    # two jobs hang in onnxruntime (static and the golden run), the others wait in the queue
    wait_for(lambda: len(marked_pids(mark)) >= 3, 60)
    time.sleep(2)
    assert verify.poll() is None
    assert_stopped_cleanly(verify, signum, mark, tmp_path / "tmp")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_verify_on_worker_processes_leaves_no_process_and_no_scratch(
    tmp_path: Path, signum: int
) -> None:
    """Two models, `--jobs 2`: the CLI and a forked worker (`baseline.executors.processes`),
    each with an ONNX helper of its own hung in onnxruntime; a signal ends all and their scratch."""
    looper_project(tmp_path / "project", limit=600, models=2)
    mark = f"{os.getpid()}-workers-{signum}"
    verify = start_verify(tmp_path / "project", tmp_path / "tmp", mark, "--jobs", "2")
    wait_for(lambda: len(marked_pids(mark)) >= 4, 60)  # the CLI, a worker, their two helpers
    time.sleep(2)
    assert verify.poll() is None
    assert_stopped_cleanly(verify, signum, mark, tmp_path / "tmp")


@pytest.mark.toolkit
def test_sigterm_ends_a_verify_with_toolkit_workers_running(demo: Path, tmp_path: Path) -> None:
    mark = f"{os.getpid()}-toolkit"
    verify = start_verify(demo, tmp_path / "tmp", mark, "--lock", "lockfiles/demo/baseline.lock")

    def worker_running() -> bool:
        return any(b"worker.py" in Path(f"/proc/{pid}/cmdline").read_bytes() for pid in marked_pids(mark))

    wait_for(worker_running, 120)
    time.sleep(1)
    assert_stopped_cleanly(verify, signal.SIGTERM, mark, tmp_path / "tmp")


@pytest.mark.toolkit
def test_a_finished_verify_leaves_no_scratch(demo: Path, tmp_path: Path) -> None:
    """Every toolkit worker used to leave its `baseline-worker-*` folder behind, every run."""
    verify = start_verify(demo, tmp_path / "tmp", "finished", "--lock", "lockfiles/demo/baseline.lock")
    _, err = verify.communicate(timeout=600)
    assert verify.returncode == 0, err
    assert [path.name for path in (tmp_path / "tmp").iterdir() if path.is_dir()] == []


def test_scratch_folders_of_killed_runs_are_removed_by_the_next(tmp_path: Path) -> None:
    """`kill -9` leaves a worker's or helper's scratch folder; the next run removes those whose
    process is gone, and nothing else (its own, a live process's, other names)."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    orphan = tmp_path / f"baseline-worker-{gone.pid}-abc123"
    mine = tmp_path / f"baseline-helper-{os.getpid()}-def456"
    other = tmp_path / "baseline-cache-123-x"
    for folder in (orphan, mine, other):
        (folder / "inside").mkdir(parents=True)
    assert remove_orphans(tmp_path) == [orphan]
    assert not orphan.exists() and mine.exists() and other.exists()


@pytest.mark.toolkit
def test_the_toolkit_worker_keeps_its_temporary_files_in_its_own_scratch() -> None:
    """rknn.api and torch make `tmpXXXX` folders with tempfile; in the caller's TMPDIR a worker
    killed mid-conversion (SIGTERM to verify) left one behind. The worker's TMPDIR is its scratch,
    which goes with it."""
    from baseline.toolchain.client import ToolkitWorker
    from baseline.toolchain.provision import DEFAULT_VERSION, ensure_toolchain

    worker = ToolkitWorker(ensure_toolchain(DEFAULT_VERSION))
    try:
        worker.start()
        assert worker.pid is not None
        environ = Path(f"/proc/{worker.pid}/environ").read_bytes().split(b"\0")
        tmpdir = next(entry for entry in environ if entry.startswith(b"TMPDIR=")).split(b"=", 1)[1]
        assert Path(tmpdir.decode()).name.startswith("baseline-worker-") and Path(tmpdir.decode()).is_dir()
    finally:
        worker.close()
    assert not Path(tmpdir.decode()).exists()
