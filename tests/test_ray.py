"""`verify` on Ray: the same report as a local run, boards as resources, workers that die.

Each test starts its own small Ray cluster on this machine (a few seconds) and runs the real
toolkit, hence the `toolkit` mark.
"""

from __future__ import annotations

import contextlib
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

from baseline.capture import capture_dir, write_bundle  # noqa: E402
from baseline.errors import BaselineError  # noqa: E402
from baseline.executors import ray_executor  # noqa: E402
from baseline.executors.ray_executor import STALL_ENV, ModelRun, board_resources, run_models  # noqa: E402
from baseline.locker import lock_project  # noqa: E402
from baseline.lockfile import load_lock  # noqa: E402
from baseline.models.results import Report, Status  # noqa: E402
from baseline.project import Project  # noqa: E402
from baseline.verify import VerifyOptions, verify_project  # noqa: E402
from tests.board.test_capture import run_on_board  # noqa: E402
from tests.conftest import LOCK, tensor_file  # noqa: E402

pytestmark = pytest.mark.toolkit

RAY = VerifyOptions(use_cache=False, executor="ray")
QUIET: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING}


@contextlib.contextmanager
def local_ray(**options: Any) -> Iterator[None]:
    ray.init(num_cpus=2, **QUIET, **options)
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


def local_report(root: Path) -> Report:
    return verify_project(Project.locate(root / LOCK), options=VerifyOptions(use_cache=False))


def test_ray_is_imported_only_when_chosen() -> None:
    probe = "import sys, baseline.cli, baseline.verify; print('ray' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout == "False\n"


def test_ray_gives_the_local_report_and_fills_the_shared_cache(demo: Path) -> None:
    local = local_report(demo)
    project = Project.locate(demo / LOCK)
    seen: list[tuple[int, int]] = []
    with local_ray():
        started = time.perf_counter()
        remote = verify_project(
            project, options=RAY, on_job=lambda done, total, _: seen.append((done, total))
        )
        elapsed = time.perf_counter() - started
        filled = verify_project(project, options=VerifyOptions(executor="ray"))  # the tasks fill the cache
    assert verdicts(remote) == verdicts(local) and remote.passed == local.passed
    assert len(list((demo / ".baseline-cache" / "results").glob("*.json"))) == 4, "one entry per model"
    cached = verify_project(project)  # a local run finds what the Ray workers stored, timings and all
    assert cached.results == filled.results and verdicts(filled) == verdicts(local)
    assert seen[-1] == (len(local.results), len(local.results)), "progress reaches the end"
    assert elapsed < 60


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


def test_a_board_model_runs_only_on_the_node_that_offers_its_board(board_demo: Path) -> None:
    from ray.cluster_utils import Cluster

    lock = load_lock(board_demo / LOCK)
    assert [board_resources(model) for model in lock.models] == [{}, {"rk3588": 1.0}, {}, {}]
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    board = cluster.add_node(num_cpus=1, resources={"rk3588": 1})
    try:
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, **QUIET)
        runs = {run.model: run for run in run_models(Project.locate(board_demo / LOCK), lock.models, RAY)}
    finally:
        ray.shutdown()
        cluster.shutdown()
    detector = runs["detector"]
    assert detector.node_id == board.node_id and detector.resources == {"CPU": 1.0, "rk3588": 1.0}
    assert all("rk3588" not in run.resources for name, run in runs.items() if name != "detector")
    by_backend = {(r.gate, r.backend): r for r in detector.results}
    assert by_backend[("consistency", "rknnlite")].status is Status.PASS, "the board's gates ran there"


def test_a_board_that_leaves_mid_run_fails_in_one_line_instead_of_waiting_forever(
    board_demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ray.cluster_utils import Cluster

    monkeypatch.setattr(ray_executor, "BOARD_GRACE", 0.0)
    marker = stall(monkeypatch, tmp_path, "detector")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    board = cluster.add_node(num_cpus=1, resources={"rk3588": 1})
    try:
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, **QUIET)
        verifying = Background(Project.locate(board_demo / LOCK), load_lock(board_demo / LOCK).models)
        stalled_pid(marker)
        cluster.remove_node(board)  # the board's host goes away while its task runs there
        verifying.join()
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert isinstance(verifying.error, BaselineError)
    message = str(verifying.error)
    assert "'detector'" in message and "rk3588" in message and "\n" not in message


def test_a_board_no_node_offers_fails_fast_in_one_line(board_demo: Path) -> None:
    with local_ray(), pytest.raises(BaselineError) as refused:
        started = time.perf_counter()
        verify_project(Project.locate(board_demo / LOCK), options=RAY)
    message = str(refused.value)
    assert "'detector'" in message and "rk3588" in message and "\n" not in message
    assert "--resources '{\"rk3588\": 1}'" in message
    assert time.perf_counter() - started < 30


class Background:
    """`run_models` in a thread, so that the test can interfere while it runs."""

    def __init__(self, project: Project, models: list[Any]) -> None:
        self.runs: list[ModelRun] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(project, models))
        self.thread.start()

    def _run(self, project: Project, models: list[Any]) -> None:
        try:
            self.runs = run_models(project, models, RAY)
        except BaseException as error:
            self.error = error

    def join(self) -> None:
        self.thread.join(timeout=120)
        assert not self.thread.is_alive()


def stall(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, model: str) -> Path:
    """The test hook: the first attempt of `model`'s task writes its pid here, then sleeps.
    Set before the Ray node starts: its workers inherit the environment."""
    marker = tmp_path / f"{model}.pid"
    monkeypatch.setenv(STALL_ENV, f"{model}:{marker}")
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
    marker = stall(monkeypatch, tmp_path, "classifier")
    with local_ray():
        verifying = Background(Project.locate(demo / LOCK), load_lock(demo / LOCK).models)
        killed = stalled_pid(marker)
        os.kill(killed, signal.SIGKILL)  # the Ray worker running classifier's first attempt
        verifying.join()
    assert verifying.error is None, verifying.error
    classifier = next(run for run in verifying.runs if run.model == "classifier")
    assert classifier.pid != killed, "another worker reran the killed task"
    assert verdicts([r for run in verifying.runs for r in run.results]) == verdicts(local)


def test_a_baseline_error_in_a_task_comes_back_as_the_same_one_line_error(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = Project.locate(demo / LOCK)
    models = load_lock(demo / LOCK).models
    intent = demo / "lockfiles/demo/baseline.toml"
    with local_ray():
        # the driver's own checks passed; the intent then changes before the tasks read it
        intent.write_text(intent.read_text().replace("samples = 2", "samples = 3"))
        with pytest.raises(BaselineError) as raised:
            run_models(project, models, RAY)
    assert type(raised.value).__name__ == "ConfigError"
    assert str(raised.value).startswith(f"{(demo / LOCK).resolve()}: lock is stale")
    monkeypatch.setattr(ray_executor, "CONNECT_TIMEOUT", 2.0)
    with pytest.raises(BaselineError, match=r"cannot reach the Ray cluster at 127\.0\.0\.1:9"):
        run_models(project, models, VerifyOptions(executor="ray", address="127.0.0.1:9"))
