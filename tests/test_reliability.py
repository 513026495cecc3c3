"""Faults and hostile input: nothing half-written, nothing let in, every failure one line.

Each test here matches a row of the "Faults and bad input" table in docs/gates.md.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from baseline.errors import BaselineError, ConfigError, InputError
from baseline.files.tensors import load_tensors
from baseline.files.tomlfile import validate
from baseline.models.intent import Intent
from baseline.project.lockfile import load_lock, parse_lock
from baseline.toolchain.client import ToolkitWorker, WorkerFailure
from tests.conftest import LOCK, REPO, one_line_error, tensor_file

INTENT = Path("lockfiles/demo/baseline.toml")


def leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*.tmp")]


# --- faults -------------------------------------------------------------------------------------


@pytest.mark.toolkit
def test_disk_full_while_writing_leaves_the_old_lock(
    demo: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = (demo / LOCK).read_bytes()
    intent = demo / INTENT
    intent.write_text(intent.read_text().replace("rtol = 1e-3", "rtol = 2e-3"))

    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("baseline.files.fsutil.os.fsync", no_space)
    code, _, err = cli(demo, "lock", "--lock", str(LOCK))
    assert code == 2 and "No space left on device" in one_line_error(err)
    assert (demo / LOCK).read_bytes() == before and not leftovers(demo)
    monkeypatch.undo()
    assert cli(demo, "lock", "--lock", str(LOCK))[0] == 0, "a rerun recovers"


@pytest.mark.toolkit
def test_interrupt_before_the_lock_is_written_keeps_the_old_baseline_valid(
    demo: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.conftest import retrain

    before = (demo / LOCK).read_bytes()
    retrain(demo)

    def interrupted(*args: object) -> bool:
        raise KeyboardInterrupt

    monkeypatch.setattr("baseline.locker.project.write_lock", interrupted)
    code, _, _ = cli(demo, "lock", "--lock", str(LOCK))  # click reports Ctrl-C as "Aborted!"
    assert code != 0 and (demo / LOCK).read_bytes() == before
    monkeypatch.undo()
    # the old lock's files were not overwritten: only the retrained model's own file differs
    code, out, err = cli(demo, "verify", "--lock", str(LOCK), "--model", "detector")
    assert code == 0, out + err
    assert cli(demo, "lock", "--lock", str(LOCK))[0] == 0
    assert cli(demo, "verify", "--lock", str(LOCK))[0] == 0


@pytest.mark.toolkit
def test_two_lock_runs_at_once_serialise(demo: Path) -> None:
    intent = demo / INTENT
    intent.write_text(intent.read_text().replace("rtol = 1e-3", "rtol = 2e-3"))
    command = [sys.executable, "-m", "baseline", "lock", "--lock", str(LOCK)]
    runs = [
        subprocess.Popen(command, cwd=demo, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)
    ]
    results = [run.communicate(timeout=600) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], results
    outputs = sorted(out.decode().split(": ")[1].split(" ")[0] for out, _ in results)
    assert outputs == ["unchanged", "written"], "the second run waited, then found nothing to do"
    verify = subprocess.run([sys.executable, "-m", "baseline", "verify", "--lock", str(LOCK)], cwd=demo)
    assert verify.returncode == 0


@pytest.mark.toolkit
def test_lock_killed_midway_recovers_on_rerun(demo: Path) -> None:
    intent = demo / INTENT
    intent.write_text(intent.read_text().replace("rtol = 1e-3", "rtol = 2e-3"))
    run = subprocess.Popen(
        [sys.executable, "-m", "baseline", "lock", "--lock", str(LOCK)],
        cwd=demo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    time.sleep(1.5)
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    load_lock(demo / LOCK)  # whatever happened, the lock parses: old or new, never half
    rerun = subprocess.run(
        [sys.executable, "-m", "baseline", "lock", "--lock", str(LOCK)],
        cwd=demo,
        capture_output=True,
        text=True,
    )
    assert rerun.returncode == 0, rerun.stderr
    assert (
        subprocess.run([sys.executable, "-m", "baseline", "verify", "--lock", str(LOCK)], cwd=demo).returncode
        == 0
    )


@pytest.mark.toolkit
def test_toolkit_killed_like_an_oom_is_a_job_error_and_the_next_job_runs(
    toolchain_worker: ToolkitWorker, tmp_path: Path
) -> None:
    toolchain_worker.start()
    assert toolchain_worker.pid is not None
    os.kill(toolchain_worker.pid, signal.SIGKILL)  # what the kernel's OOM killer does
    request: dict[str, object] = {
        "op": "build",
        "onnx": str(tmp_path / "none.onnx"),
        "platform": "rk3588",
        "workdir": str(tmp_path),
        "quantization": None,
        "export": str(tmp_path / "x.rknn"),
        "input_names": [],
        "output_names": [],
    }
    with pytest.raises(WorkerFailure, match="SIGKILL|exited"):
        toolchain_worker.request(request, timeout=30)
    reply = toolchain_worker.request(request, timeout=120)  # a fresh worker answers
    assert reply.response["ok"] is False and reply.response["stage"] == "load"


@pytest.mark.toolkit
def test_a_worker_whose_input_closes_exits_at_once_and_cleanly(
    toolchain_worker: ToolkitWorker, tmp_path: Path
) -> None:
    request: dict[str, object] = {
        "op": "build",
        "onnx": str(REPO / "fixtures" / "demo" / "classifier.onnx"),
        "platform": "rk3588",
        "workdir": str(tmp_path),
        "export": str(tmp_path / "x.rknn"),
    }
    assert toolchain_worker.request(request, timeout=120).response["ok"]
    process = toolchain_worker._process
    assert process is not None and process.stdin is not None
    process.stdin.close()
    start = time.perf_counter()
    # an orderly interpreter exit after a build took 0.77 s here (unloading the toolkit and torch)
    assert process.wait(timeout=10) == 0
    assert time.perf_counter() - start < 0.3


@pytest.mark.toolkit
def test_prestarted_workers_are_the_ones_jobs_borrow(tmp_path: Path) -> None:
    from baseline.toolchain.client import WorkerPool
    from baseline.toolchain.provision import DEFAULT_VERSION, ensure_toolchain

    toolchain, pool = ensure_toolchain(DEFAULT_VERSION), WorkerPool()
    try:
        pool.prestart(toolchain, 2)
        pool.prestart(toolchain, 2)  # idempotent: still two
        launched = {worker.pid for worker in pool._all}
        assert len(launched) == 2 and None not in launched
        with pool.borrow(toolchain) as first, pool.borrow(toolchain) as second:
            first.start()  # waits for the import already under way
            second.start()
            assert {first.pid, second.pid} == launched and first.versions
    finally:
        pool.close()


@pytest.fixture
def toolchain_worker() -> Iterator[ToolkitWorker]:
    from baseline.toolchain.provision import DEFAULT_VERSION, ensure_toolchain

    worker = ToolkitWorker(ensure_toolchain(DEFAULT_VERSION))
    yield worker
    worker.close()


# --- bad input ----------------------------------------------------------------------------------


def lock_fails(cli, root: Path) -> str:
    before = (root / LOCK).read_bytes()
    code, _, err = cli(root, "lock", "--lock", str(LOCK))
    assert code == 2, err
    assert (root / LOCK).read_bytes() == before, "nothing half-written"
    return one_line_error(err)


@pytest.mark.toolkit
def test_truncated_onnx_is_refused_in_one_line(demo: Path, cli) -> None:
    model = demo / "fixtures/demo/detector.onnx"
    model.write_bytes(model.read_bytes()[:1000])
    assert "detector.onnx" in lock_fails(cli, demo)


@pytest.mark.toolkit
def test_missing_external_data_is_named(demo: Path, cli) -> None:
    model = onnx.load(str(demo / "fixtures/demo/classifier.onnx"))
    onnx.save(
        model,
        str(demo / "fixtures/demo/classifier.onnx"),
        save_as_external_data=True,
        location="classifier.weights",
        size_threshold=0,
    )
    (demo / "fixtures/demo/classifier.weights").unlink()
    assert "external data file 'classifier.weights'" in lock_fails(cli, demo)


@pytest.mark.toolkit
def test_nan_in_reference_outputs_is_refused(demo: Path, cli) -> None:
    graph = helper.make_graph(
        [helper.make_node("Log", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8),
        str(demo / "fixtures/demo/detector.onnx"),
    )
    intent = demo / INTENT
    intent.write_text(
        intent.read_text().replace(
            "fixtures = { seed = 0, samples = 2 }", "fixtures = { seed = 0, samples = 2, low = -1.0 }"
        )
    )
    assert "NaN/Inf" in lock_fails(cli, demo)


@pytest.mark.toolkit
@pytest.mark.parametrize("path", ["/etc/passwd", "../../outside.onnx"])
def test_paths_outside_the_project_are_refused(demo: Path, cli, path: str) -> None:
    intent = demo / INTENT
    intent.write_text(intent.read_text().replace('onnx = "fixtures/demo/detector.onnx"', f'onnx = "{path}"'))
    message = lock_fails(cli, demo)
    assert "leaves the project" in message or "is absolute" in message


@pytest.mark.toolkit
def test_tampered_lock_path_cannot_make_verify_read_elsewhere(demo: Path, cli) -> None:
    lock = demo / LOCK
    pinned = tensor_file(demo, "classifier", "inputs").relative_to(demo).as_posix()
    lock.write_text(lock.read_text().replace(pinned, "../../../etc/passwd"))
    code, _, err = cli(demo, "verify", "--lock", str(LOCK))
    assert code == 2 and "leaves the project" in err


@pytest.mark.toolkit
def test_the_export_command_is_recorded_never_run(demo: Path, cli, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    intent = demo / INTENT
    intent.write_text(
        intent.read_text().replace("python fixtures/make_models.py detector", f"touch {marker}")
    )
    assert cli(demo, "lock", "--lock", str(LOCK))[0] == 0
    assert cli(demo, "verify", "--lock", str(LOCK))[0] == 0
    assert not marker.exists()
    assert f"touch {marker}" in (demo / LOCK).read_text()


@pytest.mark.toolkit
def test_fixture_needing_pickle_is_refused_at_lock(demo: Path, cli) -> None:
    np.save(demo / "fixtures/demo/evil.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    intent = demo / INTENT
    intent.write_text(
        intent.read_text().replace(
            'onnx = "fixtures/demo/overflow.onnx"',
            'onnx = "fixtures/demo/overflow.onnx"\nfixtures = { path = "fixtures/demo/evil.npy" }',
        )
    )
    assert "pickle" in lock_fails(cli, demo)


# --- parsers never crash --------------------------------------------------------------------------

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(st.binary(max_size=400))
def test_any_bytes_as_a_lock_are_a_config_error_or_a_lock(raw: bytes) -> None:
    try:
        parse_lock(raw, "fuzz.lock")
    except ConfigError as error:
        assert "\n" not in str(error)


toml_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)


@FUZZ
@given(st.dictionaries(st.sampled_from(["project", "defaults", "models", "extra"]), toml_values, max_size=4))
def test_any_structure_as_an_intent_is_a_config_error_or_an_intent(data: dict[str, object]) -> None:
    try:
        validate(Intent, data, "fuzz.toml", "intent file")
    except ConfigError as error:
        assert "\n" not in str(error)


@FUZZ
@given(st.binary(max_size=600))
def test_any_bytes_as_a_tensor_file_are_an_input_error_or_arrays(
    tmp_path_factory: pytest.TempPathFactory, raw: bytes
) -> None:
    for suffix in (".npz", ".npy"):
        path = tmp_path_factory.mktemp("fuzz") / f"t{suffix}"
        path.write_bytes(raw)
        try:
            arrays = load_tensors(path)
        except InputError:
            continue
        assert all(isinstance(array, np.ndarray) for array in arrays.values())


@FUZZ
@given(st.binary(min_size=1, max_size=200))
def test_corrupting_the_demo_lock_never_crashes(demo_lock_bytes: bytes, raw: bytes) -> None:
    corrupted = (
        demo_lock_bytes[: len(demo_lock_bytes) // 2] + raw + demo_lock_bytes[len(demo_lock_bytes) // 2 :]
    )
    try:
        parse_lock(corrupted, "fuzz.lock")
    except BaselineError as error:
        assert "\n" not in str(error)


@pytest.fixture(scope="module")
def demo_lock_bytes() -> bytes:
    from tests.conftest import REPO

    return (REPO / LOCK).read_bytes()
