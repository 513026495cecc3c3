"""The command's launcher starts the ONNX helper before the CLI's imports for a cold verify:
the helper it starts is the one the gates use, a hanging graph is still stopped at the time
limit, and nothing is left running however the verify ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from baseline.launch import only_model_file, verifies_cold
from baseline.project.paths import CACHE_ENV
from tests.test_limits import loop_model, looper_project, marked_pids, start_verify, wait_for


@pytest.mark.parametrize(
    ("args", "cold"),
    [
        (["verify", "--no-cache"], True),
        (["verify", "--no-cache", "--executor", "local", "--jobs", "2"], True),
        (["verify", "--no-cache", "--executor=ray"], False),
        (["verify", "--executor", "ray", "--no-cache"], False),
        (["verify", "--no-cache", "--help"], False),
        (["lock"], False),
        (["check", "verify"], False),
        ([], False),
    ],
)
def test_what_the_arguments_alone_decide(tmp_path: Path, args: list[str], cold: bool) -> None:
    (tmp_path / ".baseline-cache" / "results").mkdir(parents=True)  # a warm cache: only the args count
    assert verifies_cold(args, tmp_path) is cold


def test_without_no_cache_only_a_missing_result_cache_is_cold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    (tmp_path / "pyproject.toml").write_text("")
    below = tmp_path / "project"
    below.mkdir()
    assert verifies_cold(["verify"], below)
    (tmp_path / ".baseline-cache" / "results").mkdir(parents=True)  # at the project root, above
    assert not verifies_cold(["verify"], below)
    assert not verifies_cold(["verify", "--lock", "other.lock"], tmp_path / "empty")  # not guessed
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "elsewhere"))
    assert verifies_cold(["verify"], below)


COUNT_SPAWNS = """
import atexit, json, sys
from baseline.runtime import children
started = []
spawn, fork = children.spawn, children.fork
def spawning(command, **kwargs):
    started.append("spawn")
    return spawn(command, **kwargs)
def forking(run, keep, cwd):
    started.append("fork")
    return fork(run, keep, cwd)
children.spawn, children.fork = spawning, forking
atexit.register(lambda: print(json.dumps(started), file=sys.stderr))
sys.argv = ["baseline", *json.loads(sys.argv[1])]
from baseline.launch import main
main()
"""


def test_the_early_helper_is_the_one_the_gates_use(tmp_path: Path) -> None:
    looper_project(tmp_path, limit=600)
    onnx.save(loop_model(3), tmp_path / "models" / "looper.onnx")  # back to the locked model
    done = subprocess.run(
        [
            sys.executable,
            "-W",
            "error::ResourceWarning",
            "-c",
            COUNT_SPAWNS,
            json.dumps(["verify", "--no-cache"]),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr  # every gate judged: the static gate refuses the Loop
    assert "4 pass, 1 fail" in done.stdout
    assert json.loads(done.stderr.strip().splitlines()[-1]) == ["fork"]  # one helper, forked early
    assert "ResourceWarning" not in done.stderr  # its pipe is closed, not left to the collector


FORKED_HELPER = """
import json, os, sys, time
from baseline.runtime import children
from baseline.runtime.isolated import HELPERS, TimeLimitExceeded, run_limited
HELPERS.prestart(fork=True)
forked = run_limited(os.getpid, (), 30, "pid", "")
facts = {"own": forked != os.getpid(), "session": os.getsid(forked) == forked}
run_limited(print, ("printed by the helper",), 30, "print", "")
try:
    run_limited(time.sleep, (60,), 0.5, "sleep", "")
except TimeLimitExceeded:
    facts["stopped"] = True
facts["reaped"] = forked not in children.live_pids()
facts["replaced"] = run_limited(os.getpid, (), 30, "pid", "") not in (forked, os.getpid())
HELPERS.close()
facts["none left"] = children.live_pids() == []
print(json.dumps(facts))
"""


def test_a_forked_helper_is_a_helper_like_any_other(tmp_path: Path) -> None:
    """Its own session, its output kept from ours, stopped at the limit and reaped, then
    replaced by a new one (a fresh process: the fork happens before any thread runs)."""
    done = subprocess.run(
        [sys.executable, "-c", FORKED_HELPER], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines == [lines[-1]]  # the helper's print went to /dev/null
    facts = json.loads(lines[-1])
    assert facts == dict.fromkeys(["own", "session", "stopped", "reaped", "replaced", "none left"], True)


HANDED_OVER = """
import json, os, sys, time
from baseline.runtime import children
from baseline.runtime.isolated import HELPERS, run_limited
HELPERS.prestart(fork=True)
HELPERS.prestart_spare()
first = run_limited(os.getpid, (), 30, "pid", "")
spare = HELPERS.hand_over()
read_fd, write_fd = os.pipe()
def worker():
    children.forget_inherited()
    HELPERS.forget_inherited()
    HELPERS.adopt(spare)
    used = run_limited(os.getpid, (), 30, "pid", "")
    os.write(write_fd, json.dumps([used, children.live_pids()]).encode())
    children.cancel_all()  # as a worker ends: its helpers with it
worker_process = children.fork(worker, spare.descriptors() + (write_fd,), children.scratch_dir("test-"))
spare.let_go()
os.close(write_fd)
used, worker_children = json.loads(os.read(read_fd, 1000))
worker_process.wait()
facts = {
    "kept one": first != used and first == run_limited(os.getpid, (), 30, "pid", ""),
    "worker used the spare": used in worker_children and used != worker_process.pid,
    "none more to hand": HELPERS.hand_over() is None,
}
deadline = time.monotonic() + 10
while used in children.live_pids() and time.monotonic() < deadline:
    time.sleep(0.01)
facts["spare ended with the worker"] = used not in children.live_pids()
HELPERS.close()
children.cancel_all()
facts["none left"] = children.live_pids() == []
print(json.dumps(facts))
"""


def test_a_spare_helper_is_handed_to_a_forked_worker_which_ends_it(tmp_path: Path) -> None:
    """`verify --jobs 2`: the launcher forks a second helper, a worker forked later takes it over
    (its imports already done), this process keeps its own and no longer offers the spare, and
    the worker ends the helper it took though it is not its child."""
    done = subprocess.run(
        [sys.executable, "-c", HANDED_OVER], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    expected = ["kept one", "worker used the spare", "none more to hand", "spare ended with the worker"]
    assert facts == dict.fromkeys([*expected, "none left"], True)


def test_a_verify_hints_the_first_models_session_to_the_helper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hint names a function the helper can run, on the confined path of the file the
    first job checks (`HelperPool.hint` reaches only a helper that already runs)."""
    from baseline.runtime.isolated import HELPERS, _resolve
    from baseline.verification.verify import verify_project

    project = looper_project(tmp_path, limit=600)
    onnx.save(loop_model(3), tmp_path / "models" / "looper.onnx")
    hints: list[tuple[str, tuple[object, ...]]] = []
    monkeypatch.setattr(HELPERS, "hint", lambda call, args: hints.append((call, args)))
    verify_project(project)
    [(call, args)] = hints
    assert callable(_resolve(*call.split(":")))
    assert args == ((tmp_path / "models" / "looper.onnx").absolute(),)


def test_the_launcher_hints_only_the_one_model_of_a_lock_and_only_inside_the_project(
    tmp_path: Path,
) -> None:
    """The launcher reads the lock before the CLI does, so it confines the model's path itself,
    as verify does: a path out of the project, a link out, a FIFO, a file of another size than
    the lock pins, a second model, a lock that is not TOML: no hint (the CLI then reports what
    is wrong)."""
    looper_project(tmp_path, limit=600)
    onnx.save(loop_model(3), tmp_path / "models" / "looper.onnx")  # back to the locked model
    lock = tmp_path / "baseline.lock"
    locked = lock.read_text()
    assert only_model_file(lock) == (tmp_path / "models" / "looper.onnx").absolute()

    outside = tmp_path.parent / f"{tmp_path.name}-outside.onnx"
    outside.write_bytes((tmp_path / "models" / "looper.onnx").read_bytes())
    (tmp_path / "models" / "link.onnx").symlink_to(outside)
    os.mkfifo(tmp_path / "models" / "fifo.onnx")
    for path in (f"../{outside.name}", str(outside), "models/link.onnx", "models/fifo.onnx", "models"):
        lock.write_text(locked.replace('path = "models/looper.onnx"', f"path = {json.dumps(path)}"))
        assert only_model_file(lock) is None, path

    (tmp_path / "models" / "grown.onnx").write_bytes(
        (tmp_path / "models" / "looper.onnx").read_bytes() + b"x"
    )
    lock.write_text(locked.replace('path = "models/looper.onnx"', 'path = "models/grown.onnx"'))
    assert only_model_file(lock) is None  # not the size the lock pins

    second = locked[locked.index("[[models]]") :].replace('name = "looper"', 'name = "other"', 1)
    lock.write_text(locked + "\n" + second)
    assert only_model_file(lock) is None
    lock.write_text(locked + "\n[[models")
    assert only_model_file(lock) is None
    assert only_model_file(tmp_path / "missing.lock") is None


RECORD_HINTS = """
import atexit, json, sys
from baseline.runtime.isolated import HELPERS
hints = []
real = HELPERS.hint
def hint(call, args):
    hints.append({"args": [str(a) for a in args], "cli imported": "baseline.cli" in sys.modules})
    real(call, args)
HELPERS.hint = hint
atexit.register(lambda: print(json.dumps(hints), file=sys.stderr))
sys.argv = ["baseline", *json.loads(sys.argv[1])]
from baseline.launch import main
main()
"""


@pytest.mark.parametrize("selecting", [[], ["--model", "looper"]])
def test_a_cold_verify_of_one_model_hints_its_session_before_the_cli_imports(
    tmp_path: Path, selecting: list[str]
) -> None:
    """The forked helper starts building the session while the CLI still imports; verify's own
    hint (the same model) follows. An option that selects what to verify leaves it to verify."""
    looper_project(tmp_path, limit=600)
    onnx.save(loop_model(3), tmp_path / "models" / "looper.onnx")
    done = subprocess.run(
        [sys.executable, "-c", RECORD_HINTS, json.dumps(["verify", "--no-cache", *selecting])],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr  # the static gate refuses the Loop, as above
    hints = json.loads(done.stderr.strip().splitlines()[-1])
    model = str((tmp_path / "models" / "looper.onnx").absolute())
    early = [] if selecting else [{"args": [model], "cli imported": False}]
    assert hints == [*early, {"args": [model], "cli imported": True}]


def test_a_graph_that_never_ends_is_still_stopped_at_the_limit(tmp_path: Path) -> None:
    """Also: the forked helper imports onnx from the environment, never from the project
    (`python -m` puts the working directory first on the CLI's import path)."""
    looper_project(tmp_path / "project", limit=3)
    imported = tmp_path / "imported"  # a helper that imported it would die and be replaced, unseen
    (tmp_path / "project" / "onnx.py").write_text(f"open({str(imported)!r}, 'w')\nraise ImportError\n")
    mark = f"{os.getpid()}-early"
    verify = start_verify(tmp_path / "project", tmp_path / "tmp", mark, "--format", "json")
    out, err = verify.communicate(timeout=120)
    assert verify.returncode == 1, err
    summaries = {r["gate"]: r["summary"] for r in json.loads(out)["results"] if r["status"] == "error"}
    assert "did not finish within 3 s" in summaries["static"]
    assert "did not finish within 3 s" in summaries["consistency"]
    assert not imported.exists()
    wait_for(lambda: not marked_pids(mark), 5)
    assert [path.name for path in (tmp_path / "tmp").iterdir() if path.is_dir()] == []


def test_a_verify_refused_before_any_gate_reaps_the_early_helper(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()  # no lock: refused once the CLI reads its arguments
    mark = f"{os.getpid()}-refused"
    verify = start_verify(tmp_path / "project", tmp_path / "tmp", mark)
    _, err = verify.communicate(timeout=60)
    assert verify.returncode == 2, err
    assert "Traceback" not in err
    wait_for(lambda: not marked_pids(mark), 5)
    assert [path.name for path in (tmp_path / "tmp").iterdir() if path.is_dir()] == []


def test_helpers_ended_once_the_gates_are_done_are_replaced_and_reaped() -> None:
    """`verify` ends its idle helpers before writing the report (`HelperPool.end_idle`); a
    process that goes on (the CLI's tests) gets a new helper, and the old one is reaped."""
    from baseline.runtime import children
    from baseline.runtime.isolated import HELPERS, run_limited

    HELPERS.close()
    first = run_limited(os.getpid, (), 30, "pid", "")
    HELPERS.end_idle()
    wait_for(lambda: first not in children.live_pids(), 10)
    second = run_limited(os.getpid, (), 30, "pid", "")
    assert second != first
    with pytest.raises(ProcessLookupError):  # reaped, not left a zombie
        os.kill(first, 0)
    HELPERS.close()


BLAS_THREADS = """
import json, os, subprocess, sys
from baseline.runtime import children
children.limit_blas_threads()
import numpy
seen = children.spawn([sys.executable, "-c", "import os; print(os.environ.get('OPENBLAS_NUM_THREADS'))"],
                      stdout=subprocess.PIPE)
child = seen.communicate()[0].decode().strip()
children.forget(seen)
print(json.dumps([os.environ.get("OPENBLAS_NUM_THREADS"), len(os.listdir("/proc/self/task")), child]))
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
@pytest.mark.parametrize(("users", "ours", "childs"), [(None, "1", "None"), ("3", "3", "3")])
def test_numpy_gets_one_blas_thread_unless_the_user_chose_and_spawned_children_get_the_users(
    users: str | None, ours: str, childs: str
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if users is not None:
        env["OPENBLAS_NUM_THREADS"] = users
    done = subprocess.run(
        [sys.executable, "-c", BLAS_THREADS], env=env, capture_output=True, text=True, check=True, timeout=60
    )
    value, threads, child = json.loads(done.stdout)
    assert value == ours and child == childs
    if users is None:
        assert threads == 1  # no OpenBLAS thread spinning beside the helper


@pytest.mark.parametrize(
    ("cold", "args", "expected"),
    [
        (True, ["verify"], ["limit", "helper", "cli"]),
        (False, ["verify"], ["cli"]),  # cached, or one job at a time: the user's BLAS
        (False, ["verify", "--jobs", "2"], ["limit", "cli"]),  # worker processes need one thread
        (False, ["verify", "-j", "3"], ["limit", "cli"]),
        (False, ["verify", "--jobs", "2", "--executor", "ray"], ["cli"]),
        (False, ["lock", "--jobs", "2"], ["cli"]),
    ],
)
def test_the_launcher_limits_blas_for_a_cold_verify_before_the_helper_is_forked(
    monkeypatch: pytest.MonkeyPatch, cold: bool, args: list[str], expected: list[str]
) -> None:
    from baseline import cli, launch
    from baseline.runtime import children

    calls = []
    monkeypatch.setattr(children, "limit_blas_threads", lambda: calls.append("limit"))
    monkeypatch.setattr(launch, "verifies_cold", lambda args, cwd: cold)
    monkeypatch.setattr(launch, "_start_helper", lambda args: calls.append("helper"))
    monkeypatch.setattr(cli, "main", lambda: calls.append("cli"))
    monkeypatch.setattr(sys, "argv", ["baseline", *args])
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "__all__")
    launch.main()
    assert calls == expected
