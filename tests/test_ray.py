"""`verify`, `lock` and `matrix` on Ray: the same results as a local run, boards as resources,
workers that die.

Each test starts its own small Ray cluster on this machine (a few seconds) and runs the real
toolkit, hence the `toolkit` mark.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray", reason="the Ray executor's tests need ray (pip install ray)")

from baseline.board.capture import capture_dir, write_bundle  # noqa: E402
from baseline.errors import BaselineError  # noqa: E402
from baseline.executors import ExecutorOptions, Task, ray_executor  # noqa: E402
from baseline.executors.ray_executor import STALL_ENV, TaskRun, run_on_ray  # noqa: E402
from baseline.gates.context import VerifyContext  # noqa: E402
from baseline.locker import lock_project  # noqa: E402
from baseline.models.results import Report, Status  # noqa: E402
from baseline.project.layout import Project  # noqa: E402
from baseline.project.lockfile import load_lock  # noqa: E402
from baseline.verification.matrix import run_matrix  # noqa: E402
from baseline.verification.verify import VerifyOptions, board_resources, job_tasks, plan_jobs, verify_project  # noqa: E402
from tests.board.test_capture import run_on_board  # noqa: E402
from tests.conftest import LOCK, tensor_file  # noqa: E402

pytestmark = pytest.mark.toolkit

RAY = VerifyOptions(use_cache=False, executor="ray")
QUIET: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING}


@contextlib.contextmanager
def local_ray(**options: Any) -> Iterator[None]:
    ray.init(address="local", num_cpus=2, **QUIET, **options)  # never a cluster left running here
    try:
        yield
    finally:
        ray.shutdown()


def verdicts(results: Report | list[Any]) -> list[tuple[Any, ...]]:
    """Each result as the report shows it, with numbers blanked: timings differ from run to run."""
    items = results.results if isinstance(results, Report) else results
    return [
        (r.model, r.gate, r.backend, r.target, r.status, re.sub(r"\d+(\.\d+)?", "#", r.summary))
        for r in items
    ]


def as_json(report: Report) -> list[dict[str, Any]]:
    """Results as a report file carries them (NaN metrics become null, as in the cache)."""
    return [json.loads(result.model_dump_json()) for result in report.results]


def local_report(root: Path, lock: Path = LOCK) -> Report:
    return verify_project(Project.locate(root / lock), options=VerifyOptions(use_cache=False))


def test_ray_is_imported_only_when_chosen() -> None:
    probe = "import sys, baseline.cli, baseline.verification.verify; print('ray' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout == "False\n"


def test_ray_gives_the_local_report_and_the_driver_fills_the_cache(demo: Path) -> None:
    local = local_report(demo)
    project = Project.locate(demo / LOCK)
    seen: list[tuple[int, int]] = []
    with local_ray():
        started = time.perf_counter()
        remote = verify_project(
            project, options=RAY, on_job=lambda done, total, _: seen.append((done, total))
        )
        elapsed = time.perf_counter() - started
        filled = verify_project(project, options=VerifyOptions(executor="ray"))
    assert verdicts(remote) == verdicts(local) and remote.passed == local.passed
    jobs = plan_jobs(load_lock(demo / LOCK).models)
    assert len(list((demo / ".baseline-cache" / "results").glob("*.json"))) == len(jobs), "one entry per job"
    cached = verify_project(project)  # a local run finds what the Ray run stored, timings and all
    assert as_json(cached) == as_json(filled) and verdicts(filled) == verdicts(local)
    assert seen[-1] == (len(local.results), len(local.results)), "progress reaches the end"
    assert elapsed < 60


def test_a_fully_cached_verify_answers_without_starting_ray(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = Project.locate(demo / LOCK)
    first = verify_project(project)

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("Ray was started for work the cache answers")

    monkeypatch.setattr(ray, "init", refuse)
    assert as_json(verify_project(project, options=VerifyOptions(executor="ray"))) == as_json(first)


def test_lock_on_ray_writes_the_same_lock_and_files_as_locally(demo: Path) -> None:
    lock_path = demo / LOCK
    before = lock_path.read_bytes()
    contents = tensor_folder(demo)
    assert any(path.suffix == ".rknn" for path in contents) and any(
        path.suffix == ".npz" for path in contents
    )
    with local_ray():
        outcome = lock_project(Project.locate(lock_path), options=ExecutorOptions(executor="ray"))
    assert not outcome.changed and lock_path.read_bytes() == before, "relocking on Ray changes nothing"
    assert tensor_folder(demo) == contents, "the same tensor and .rknn files, byte for byte"


def tensor_folder(root: Path) -> dict[Path, bytes]:
    """Every file baseline keeps for the demo's models (tensors and .rknn artifacts)."""
    folder = tensor_file(root, "classifier", "inputs").parent.parent
    return {path: path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def test_lock_on_ray_puts_a_new_model_state_in_the_lock_as_a_local_lock_does(demo: Path) -> None:
    from tests.conftest import retrain

    retrain(demo, "classifier")
    twin = demo.parent / "twin"
    shutil.copytree(demo, twin)
    with local_ray():
        lock_project(Project.locate(demo / LOCK), options=ExecutorOptions(executor="ray"))
    lock_project(Project.locate(twin / LOCK))
    # a fresh conversion's .rknn differs in a few volatile bytes; its fingerprint must not
    assert without_artifact_bytes(demo) == without_artifact_bytes(twin)
    classifier = load_lock(demo / LOCK).model("classifier")
    assert classifier is not None and all(
        (demo / ref.tensors.path).is_file() for ref in classifier.references
    )


def without_artifact_bytes(root: Path) -> dict[str, Any]:
    lock = load_lock(root / LOCK).model_dump(mode="json")
    for model in lock["models"]:
        for conversion in model["conversions"]:
            del conversion["artifact"]
    return lock


def test_matrix_on_ray_gives_the_local_cells(demo: Path) -> None:
    lock = load_lock(demo / LOCK)
    ctx = VerifyContext(project=Project.locate(demo / LOCK), lock=lock)
    local = run_matrix(ctx, ["2.5.0"], lock.models)
    with local_ray():
        remote = run_matrix(ctx, ["2.5.0"], lock.models, options=ExecutorOptions(executor="ray"))
    assert remote.cells == local.cells and remote.changes == local.changes
    assert len(remote.cells) == sum(len(m.targets) for m in lock.models if "rknn-sim" in m.backends)


@pytest.fixture(scope="module")
def board_demo(locked_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo with the detector also checked on its board (rknnlite, on rk3588), captured."""
    root = tmp_path_factory.mktemp("board") / "project"
    shutil.copytree(locked_template, root)
    project, lock = Project.locate(root / LOCK), load_lock(root / LOCK)
    bundle = write_bundle(
        project, lock, "detector", "rk3588", capture_dir(project, lock, "detector", "rk3588")
    )
    run_on_board(bundle, tensor_file(root, "detector", "outputs.rknn-sim.rk3588"))
    intent = root / "lockfiles/demo/baseline.toml"
    intent.write_text(
        intent.read_text().replace(
            'name = "detector"\n', 'name = "detector"\nbackends = ["onnxruntime", "rknn-sim", "rknnlite"]\n'
        )
    )
    lock_project(Project.locate(root / LOCK))
    return root


def board_tasks(root: Path) -> list[Task]:
    lock = load_lock(root / LOCK)
    return job_tasks(VerifyContext(project=Project.locate(root / LOCK), lock=lock), plan_jobs(lock.models))


def test_only_board_jobs_run_on_the_node_that_offers_the_board(board_demo: Path) -> None:
    from ray.cluster_utils import Cluster

    lock = load_lock(board_demo / LOCK)
    jobs = plan_jobs(lock.models)
    assert [(j.model, j.backend, j.target) for j in jobs if board_resources(lock, j)] == [
        ("detector", "rknnlite", "rk3588")
    ]
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    board = cluster.add_node(num_cpus=1, resources={"rk3588": 1})
    try:
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, **QUIET)
        runs = {run.name: run for run in run_on_ray(board_tasks(board_demo), RAY)}
    finally:
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call]  # ray's test cluster is not annotated
    on_board = runs.pop("verify detector rknnlite/rk3588")
    assert on_board.node_id == board.node_id and on_board.resources == {"CPU": 1.0, "rk3588": 1.0}
    assert all("rk3588" not in run.resources for run in runs.values()), "simulator jobs ask for no board"
    by_gate = {r.gate: r for r in on_board.value}
    assert by_gate["consistency"].status is Status.PASS, "the board's gates ran there"


def test_a_board_that_leaves_mid_run_fails_in_one_line_instead_of_waiting_forever(
    board_demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ray.cluster_utils import Cluster

    monkeypatch.setattr(ray_executor, "BOARD_GRACE", 0.0)
    marker = stall(monkeypatch, tmp_path, "verify detector rknnlite/rk3588")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    board = cluster.add_node(num_cpus=1, resources={"rk3588": 1})
    try:
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, **QUIET)
        verifying = Background(board_tasks(board_demo))
        stalled_pid(marker)
        cluster.remove_node(board)  # the board's host goes away while its task runs there
        verifying.join()
    finally:
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call]  # ray's test cluster is not annotated
    assert isinstance(verifying.error, BaselineError)
    message = str(verifying.error)
    assert "'detector'" in message and "rk3588" in message and "\n" not in message


def test_small_jobs_go_in_batches_and_large_ones_alone() -> None:
    tasks = [Task(f"t{i}", len, ("ab",), small=i not in (3, 40)) for i in range(50)]
    batches = ray_executor._batches(tasks, cpus=2.0)
    assert batches[:2] == [[3], [40]], "a toolkit or board job is a Ray task of its own"
    small = batches[2:]
    assert len(small) == 2 * ray_executor.BATCHES_PER_CPU
    assert [i for batch in small for i in batch] == [i for i in range(50) if i not in (3, 40)]
    assert max(map(len, small)) - min(map(len, small)) <= 1
    assert ray_executor._batches(tasks[:3], cpus=4.0) == [[0], [1], [2]], "never an empty batch"
    assert ray_executor._batches([], cpus=2.0) == []


def test_batched_small_jobs_give_each_value_and_stop_at_the_first_error(tmp_path: Path) -> None:
    missing = tmp_path / "gone.onnx"
    tasks = [Task(f"t{i}", len, ("x" * i,), small=True) for i in range(40)]
    seen: list[int] = []
    with local_ray():
        runs = run_on_ray(tasks, RAY, lambda index, value, seconds: seen.append(index))
        assert [run.value for run in runs] == list(range(40)) and sorted(seen) == list(range(40))
        assert len({run.pid for run in runs}) <= 2, "the jobs ran in the cluster's two workers"
        broken = [*tasks[:20], Task("t20", os.stat, (str(missing),), small=True), *tasks[21:]]
        with pytest.raises(BaselineError) as raised:
            run_on_ray(broken, RAY)
    assert str(missing) in str(raised.value) and "shared filesystem" in str(raised.value)
    assert "\n" not in str(raised.value)


def test_an_onnxruntime_only_zoo_locks_and_verifies_on_ray_in_batches_as_locally(tmp_path: Path) -> None:
    """Its lock jobs and verify jobs are all small: they run batched, and the lock's bytes and
    the report are the local run's."""
    from tests.test_zoo import zoo

    roots = [zoo.make_zoo(tmp_path / name, 6) for name in ("ray", "local")]
    lock = Path("zoo.lock")
    with local_ray():
        lock_project(Project.locate(roots[0] / lock), options=ExecutorOptions(executor="ray"))
        remote = verify_project(Project.locate(roots[0] / lock), options=RAY)
    lock_project(Project.locate(roots[1] / lock))
    assert (roots[0] / lock).read_bytes() == (roots[1] / lock).read_bytes()
    assert verdicts(remote) == verdicts(local_report(roots[1], lock))
    assert all(result.status is Status.PASS for result in remote.results)


def test_a_board_no_node_offers_fails_fast_in_one_line(board_demo: Path) -> None:
    with local_ray(), pytest.raises(BaselineError) as refused:
        started = time.perf_counter()
        verify_project(Project.locate(board_demo / LOCK), options=RAY)
    message = str(refused.value)
    assert "'detector'" in message and "rknnlite" in message and "\n" not in message
    assert "--resources '{\"rk3588\": 1}'" in message
    assert time.perf_counter() - started < 30


class Background:
    """`run_on_ray` in a thread, so that the test can interfere while it runs."""

    def __init__(self, tasks: list[Task]) -> None:
        self.runs: list[TaskRun] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(tasks,))
        self.thread.start()

    def _run(self, tasks: list[Task]) -> None:
        try:
            self.runs = run_on_ray(tasks, RAY)
        except BaseException as error:
            self.error = error

    def join(self) -> None:
        self.thread.join(timeout=120)
        assert not self.thread.is_alive()


def stall(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, task: str) -> Path:
    """The test hook: the first attempt of the task named `task` writes its pid here, then sleeps.
    Set before the Ray node starts: its workers inherit the environment."""
    marker = tmp_path / "stalled.pid"
    monkeypatch.setenv(STALL_ENV, f"{task}={marker}")
    return marker


def stalled_pid(marker: Path) -> int:
    deadline = time.monotonic() + 60
    while not (marker.is_file() and marker.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return int(marker.read_text())


def test_a_worker_killed_mid_run_still_gives_the_complete_report(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = local_report(demo)
    marker = stall(monkeypatch, tmp_path, "verify classifier rknn-sim/rk3588")
    with local_ray():
        verifying = Background(board_tasks(demo))
        killed = stalled_pid(marker)
        os.kill(killed, signal.SIGKILL)  # the Ray worker running that job's first attempt
        verifying.join()
    assert verifying.error is None, verifying.error
    rerun = next(run for run in verifying.runs if run.name == "verify classifier rknn-sim/rk3588")
    assert rerun.pid != killed, "another worker reran the killed task"
    order = {(r.model, r.gate, r.backend, r.target): i for i, r in enumerate(local.results)}
    results = sorted(
        (r for run in verifying.runs for r in run.value),
        key=lambda r: order[(r.model, r.gate, r.backend, r.target)],
    )
    assert verdicts(results) == verdicts(local)


def test_a_baseline_error_in_a_task_comes_back_as_the_same_one_line_error(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    onnx = demo / "fixtures/demo/classifier.onnx"
    onnx.write_bytes(onnx.read_bytes()[:100])  # the task, not the driver, reads the model
    with local_ray(), pytest.raises(BaselineError) as raised:
        lock_project(Project.locate(demo / LOCK), options=ExecutorOptions(executor="ray"))
    assert type(raised.value).__name__ == "InputError"
    assert "classifier.onnx" in str(raised.value) and "\n" not in str(raised.value)
    monkeypatch.setattr(ray_executor, "CONNECT_TIMEOUT", 2.0)
    with pytest.raises(BaselineError, match=r"cannot reach the Ray cluster at 127\.0\.0\.1:9"):
        verify_project(
            Project.locate(demo / LOCK),
            options=VerifyOptions(use_cache=False, executor="ray", address="127.0.0.1:9"),
        )


# Issue 14, item 14: every wait on the cluster is bounded. These two need no toolkit (an
# onnxruntime-only project) but start Ray clusters (slow): they share the module's mark.


@pytest.fixture
def ray_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private RAY_TMPDIR (short: Ray's socket paths must fit 107 bytes), so that the clusters
    started here are never seen by Ray runs of other processes on this machine."""
    import tempfile

    home = Path(tempfile.mkdtemp(prefix="bray", dir="/tmp"))
    monkeypatch.setenv("RAY_TMPDIR", str(home))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


@contextlib.contextmanager
def outside_head(home: Path, env: dict[str, str] | None = None) -> Iterator[tuple[str, int]]:
    """`ray start --head` run by another process: (its address, its process group)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [
        str(Path(sys.executable).with_name("ray")),
        "start",
        "--head",
        "--block",
        f"--port={port}",
        "--node-ip-address=127.0.0.1",
        "--num-cpus=1",
        "--include-dashboard=false",
        f"--temp-dir={home}",
    ]
    log = (home / "head.log").open("w")
    head = subprocess.Popen(
        command, stdout=log, stderr=log, start_new_session=True, env={**os.environ, **(env or {})}
    )
    try:
        deadline = time.monotonic() + 90
        while not (home / "ray_current_cluster").is_file():
            assert head.poll() is None and time.monotonic() < deadline, (home / "head.log").read_text()
            time.sleep(0.2)
        time.sleep(1)
        yield f"127.0.0.1:{port}", head.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGKILL)
        head.wait()
        log.close()


def onnxruntime_project(root: Path) -> Path:
    from onnx import TensorProto, helper, save

    (root / "models").mkdir(parents=True)
    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in "xy")
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", [x], [y])
    save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8),
        root / "models" / "relu.onnx",
    )
    (root / "baseline.toml").write_text(
        '[defaults]\nbackends = ["onnxruntime"]\n\n[[models]]\nname = "relu"\nonnx = "models/relu.onnx"\n'
    )
    lock_project(Project.locate(root / "baseline.lock"))
    return root


def test_without_an_address_ray_starts_a_cluster_of_its_own(ray_home: Path) -> None:
    with outside_head(ray_home) as (address, _):
        try:
            assert ray_executor._connect(None)
            joined = ray.get_runtime_context().gcs_address
        finally:
            ray.shutdown()
    assert joined != address, "joined a cluster another process left running"


def test_a_cluster_that_goes_away_mid_run_fails_in_one_line(ray_home: Path, tmp_path: Path) -> None:
    root = onnxruntime_project(tmp_path / "project")
    marker = tmp_path / "stalled.pid"
    stall = {STALL_ENV: f"verify relu onnxruntime={marker}"}
    with outside_head(ray_home, stall) as (address, group):
        verify = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "baseline",
                "verify",
                "--no-cache",
                "--executor",
                "ray",
                "--address",
                address,
            ],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        stalled_pid(marker)
        os.killpg(group, signal.SIGKILL)  # the whole cluster goes away while the task runs
        started = time.monotonic()
        try:
            _, err = verify.communicate(timeout=150)
        finally:
            verify.kill()
    assert time.monotonic() - started < 90
    assert verify.returncode == 2, err
    last = err.strip().splitlines()[-1]
    assert f"the Ray cluster at {address} stopped answering" in last and "ray status" in last, err
    assert "Traceback" not in err
