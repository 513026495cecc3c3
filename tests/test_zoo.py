"""A generated zoo (bench/zoo.py, onnxruntime only, no toolkit): what a cached run redoes.

Behaviour, not timings: which jobs a verify reruns, what `--no-cache` leaves behind, and that
`lock --check` answered from the cache says what a real check says. The timings are in
`nox -s bench` (bench/zoo.py).
"""

from __future__ import annotations

import datetime
import functools
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from baseline.errors import ConfigError
from baseline.locker import lock_project
from baseline.project.layout import Project
from baseline.project.paths import ProjectPaths, resolve_in_project
from baseline.verification.jobkeys import VerifyJob
from baseline.verification.verify import VerifyOptions, verify_project

LOCK = Path("zoo.lock")


def _load_zoo() -> ModuleType:
    path = Path(__file__).resolve().parent.parent / "bench" / "zoo.py"
    spec = importlib.util.spec_from_file_location("bench_zoo", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


zoo = _load_zoo()


@pytest.fixture
def project(tmp_path: Path) -> Project:
    root = zoo.make_zoo(tmp_path / "zoo", 4)
    located = Project.locate(root / LOCK)
    lock_project(located)
    return located


def jobs_run(project: Project, use_cache: bool = True) -> list[str]:
    """The labels of the jobs a verify ran (cached ones are reported with "(cached)")."""
    labels: list[str] = []

    def seen(_done: int, _total: int, label: str) -> None:
        if label != "done" and not label.endswith("(cached)"):
            labels.append(label)

    verify_project(project, on_job=seen, options=VerifyOptions(use_cache=use_cache))
    return labels


def test_verify_after_changing_one_model_reruns_only_its_jobs(project: Project) -> None:
    first = jobs_run(project)
    assert len(first) == 4 * 3  # per model: integrity, checks/rk3588 (static, compat), onnxruntime
    assert jobs_run(project) == []
    zoo.retrain(project.root, 2)
    rerun = jobs_run(project)
    assert sorted(rerun) == sorted(label for label in first if label.startswith("m0002 "))


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_cold_verify_runs_each_model_once_on_onnxruntime_for_every_target_and_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    """Three targets, and consistency and drift both read the golden run: one run per model."""
    from baseline.backends.onnxrt import OnnxRuntimeBackend

    root = zoo.make_zoo(tmp_path / "zoo", 2)
    intent = root / "zoo.toml"
    w8a8 = '{ name = "rk3588-w8a8", platform = "rk3588", quantization = { dtype = "w8a8" } }'
    three = f'targets = ["rk3588", "rk3566", {w8a8}]'
    intent.write_text(intent.read_text().replace('targets = ["rk3588"]', three))
    located = Project.locate(root / LOCK)
    lock_project(located)
    # a file: with --jobs 2 the runs may happen in a forked worker (where this process has no
    # other thread: an earlier fork in it stops OpenBLAS's pool, see `children.safe_to_fork`)
    ran = tmp_path / "ran.txt"
    real = OnnxRuntimeBackend.run_impl

    def counted(self: OnnxRuntimeBackend, job: Any) -> Any:
        with ran.open("a") as log:
            log.write(f"{job.model}\n")
        return real(self, job)

    monkeypatch.setattr(OnnxRuntimeBackend, "run_impl", counted)
    report = verify_project(located, options=VerifyOptions(use_cache=False, jobs=jobs))
    gates = {(result.model, result.gate) for result in report.results}
    assert {("m0000", "consistency"), ("m0000", "drift"), ("m0001", "drift")} <= gates
    assert sorted(ran.read_text().split()) == ["m0000", "m0001"]


def test_the_helper_is_hinted_the_model_of_the_job_that_runs_first(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several jobs at once start longest first: a model whose job took longest last time is
    hinted, not the lock's first. One at a time, jobs run in the plan's order (it changes no
    total, and keeps a model's jobs together): the lock's first model is hinted."""
    from baseline.project.lockfile import load_lock
    from baseline.project.paths import cache_root
    from baseline.runtime.isolated import HELPERS
    from baseline.verification.cache import JobTimes
    from baseline.verification.verify import plan_jobs

    jobs = plan_jobs(load_lock(project.lock_path).models)
    verify_project(project)  # every job timed: a job never timed would run first
    times = JobTimes(cache_root(project.root) / "job-times.json")
    times.record(next(job.label for job in jobs if job.model == "m0003" and job.backend), 99.0)
    times.save()
    hints: list[tuple[object, ...]] = []
    monkeypatch.setattr(HELPERS, "hint", lambda call, args: hints.append(args))
    verify_project(project, options=VerifyOptions(use_cache=False, jobs=2))
    assert hints == [((project.root / "models" / "m0003.onnx").absolute(),)]
    verify_project(project, options=VerifyOptions(use_cache=False, jobs=1))
    assert hints[1:] == [((project.root / "models" / "m0000.onnx").absolute(),)]
    verify_project(project)  # answered from the cache: no session to build
    assert len(hints) == 2


def test_one_job_at_a_time_runs_the_plan_s_order(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--jobs 1` runs jobs as the plan lists them whatever their last durations: a model's
    jobs together, the static check before the golden run."""
    from baseline.project.lockfile import load_lock
    from baseline.project.paths import cache_root
    from baseline.verification import verify
    from baseline.verification.verify import plan_jobs

    planned = [job.label for job in plan_jobs(load_lock(project.lock_path).models)]
    verify_project(project, options=VerifyOptions(use_cache=False))
    times_path = cache_root(project.root) / "job-times.json"
    times = json.loads(times_path.read_text())
    times[planned[-1]] = 99.0  # the last planned job was the longest
    times_path.write_text(json.dumps(times))
    ran: list[str] = []
    real = verify.run_job

    def run_job(ctx: object, job: VerifyJob) -> object:
        ran.append(job.label)
        return real(ctx, job)  # type: ignore[arg-type]

    monkeypatch.setattr(verify, "run_job", run_job)
    verify_project(project, options=VerifyOptions(use_cache=False, jobs=1))
    assert ran == planned


def test_no_cache_reads_nothing_and_stores_fresh_results(project: Project) -> None:
    jobs_run(project)
    assert len(jobs_run(project, use_cache=False)) == 4 * 3
    assert jobs_run(project) == [], "the run after --no-cache is answered from what it stored"


def test_a_relocked_zoo_reruns_only_the_changed_model_though_every_key_recipe_is_new(
    project: Project,
) -> None:
    """Recipes (each job's lock-derived part of its key) are kept under the lock's sha256: a
    new lock computes them all again, and the unchanged models' keys come out the same."""
    first = jobs_run(project)
    zoo.retrain(project.root, 1)
    lock_project(project)
    rerun = jobs_run(project)
    assert sorted(rerun) == sorted(label for label in first if label.startswith("m0001 "))


def test_a_damaged_recipe_file_is_a_slower_run_never_a_wrong_answer(project: Project) -> None:
    from baseline.verification.cache import cache_root

    jobs_run(project)
    [recipes] = (cache_root(project.root) / "batches").glob("recipes-*.json")
    document = json.loads(recipes.read_text())
    for damaged in ("{not json", "[]", json.dumps({**document, "jobs": {"m0000 checks": [1, 2]}})):
        recipes.write_text(damaged)
        assert jobs_run(project) == [], "the recipes are computed again, the same keys found"
    zoo.retrain(project.root, 3)
    recipes.write_text(json.dumps(document))  # recipes of the same lock: the ONNX file is read live
    assert sorted(jobs_run(project)) == sorted(
        label for label in jobs_run(project, use_cache=False) if label.startswith("m0003 ")
    )


def test_a_verify_process_prints_its_whole_report_and_exits_with_its_code(project: Project) -> None:
    """The command ends its process without the interpreter's teardown (`_exit_now`): the
    report is still complete and the exit code the gates' verdict."""
    command = [sys.executable, "-m", "baseline", "verify", "--lock", str(LOCK)]
    passed = subprocess.run(command, cwd=project.root, capture_output=True, text=True, check=False)
    assert passed.returncode == 0 and passed.stdout.rstrip().endswith("PASSED: 20 pass"), passed.stdout
    zoo.retrain(project.root, 0)
    failed = subprocess.run(command, cwd=project.root, capture_output=True, text=True, check=False)
    assert failed.returncode == 1 and failed.stdout.rstrip().splitlines()[-1].startswith("FAILED")


def test_the_command_runs_exit_handlers_before_it_ends_the_process(tmp_path: Path) -> None:
    marker = tmp_path / "handler-ran"
    script = (
        f"import atexit, sys; atexit.register(lambda: open({str(marker)!r}, 'w').close()); "
        "sys.argv = ['baseline', 'verify', '--lock', 'missing.lock']; "
        "from baseline.cli import main; main(); print('not reached')"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 2 and "missing.lock" in done.stderr and "not reached" not in done.stdout
    assert marker.exists()


def _check(cli, root: Path, *extra: str) -> tuple[int, str, str]:
    code, out, err = cli(root, "lock", "--lock", str(LOCK), "--check", *extra)
    return int(code), str(out), str(err)


def test_a_relock_measures_only_the_changed_model_and_writes_what_a_full_lock_writes(
    project: Project, cli
) -> None:
    root = project.root
    assert "locking 4 models:" in cli(root, "lock", "--lock", str(LOCK))[2], "nothing remembered yet"
    zoo.retrain(root, 2)
    code, _, err = cli(root, "lock", "--lock", str(LOCK))
    assert code == 0 and "locking 1 models (3 unchanged, answered from the cache): m0002" in err, err
    incremental, files = (root / LOCK).read_bytes(), _tensor_files(root)
    code, _, err = cli(root, "lock", "--lock", str(LOCK), "--no-cache")
    assert code == 0 and "locking 4 models:" in err, "--no-cache measures every model again"
    assert (root / LOCK).read_bytes() == incremental and _tensor_files(root) == files


def test_a_relock_measures_again_a_model_whose_pinned_files_are_gone_or_changed(
    project: Project, cli
) -> None:
    root = project.root
    cli(root, "lock", "--lock", str(LOCK))
    written = _tensor_files(root)
    [gone] = (root / "tensors" / "m0001").glob("inputs.*.npz")
    gone.unlink()
    [edited] = (root / "tensors" / "m0003").glob("inputs.*.npz")
    edited.write_bytes(edited.read_bytes() + b"\0")
    code, _, err = cli(root, "lock", "--lock", str(LOCK))
    assert code == 0 and "locking 2 models (2 unchanged, answered from the cache): m0001, m0003" in err
    assert _tensor_files(root) == written and gone.is_file()
    assert cli(root, "verify", "--lock", str(LOCK))[0] == 0


def test_a_relock_judges_every_model_by_its_own_gates_remembered_or_not(project: Project) -> None:
    from baseline.locker.memo import LockMemo

    lock_project(project, memo=LockMemo.open(project))
    zoo.retrain(project.root, 0)
    outcome = lock_project(project, memo=LockMemo.open(project))
    assert outcome.self_check is not None
    assert {result.model for result in outcome.self_check.results} == {f"m000{i}" for i in range(4)}


def _tensor_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in (root / "tensors").rglob("*.npz")}


def test_lock_check_from_the_cache_says_what_a_real_check_says(project: Project, cli) -> None:
    root = project.root
    cli(root, "lock", "--lock", str(LOCK))  # a lock run remembers each model's job
    code, out, err = _check(cli, root)
    assert (code, out.strip()) == (0, f"{LOCK}: up to date")
    assert "locking 0 models (4 unchanged" in err, err
    zoo.retrain(root, 1)
    cached, real = _check(cli, root), _check(cli, root, "--no-cache")
    assert cached[0] == real[0] == 1
    assert cached[1] == real[1] and "m0001: onnx.sha256" in cached[1]
    assert "locking 1 models (3 unchanged, answered from the cache): m0001" in cached[2]


def test_lock_check_from_the_cache_still_sees_files_and_text(project: Project, cli) -> None:
    root = project.root
    _check(cli, root)  # a real check remembers every model
    text = (root / LOCK).read_text()
    (root / LOCK).write_text(text.replace("# This file", "#  This file", 1))
    code, out, _ = _check(cli, root)
    assert code == 1 and "would be rewritten (same values, different text)" in out
    (root / LOCK).write_text(text)
    [fixture] = (root / "tensors" / "m0003").glob("inputs.*.npz")
    fixture.write_bytes(fixture.read_bytes() + b"\0")
    code, out, err = _check(cli, root)
    assert code == 1 and f"file {fixture.relative_to(root).as_posix()} would be rewritten" in out
    assert "locking 0 models" in err, "answered from the cache, the file compared by hash"


def test_lock_check_after_one_change_reads_only_what_changed(
    project: Project, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After one model changes, a check answered from the cache hashes that model's file only,
    parses the lock's TOML never (its JSON is remembered, and the lock the check replaced serves
    the diff) and renders no lock text (the replaced lock's JSON decides)."""
    from baseline.files.hashing import sha256_file
    from baseline.files.tomlfile import parse_toml
    from baseline.project.lockfile import render_lock

    root = project.root
    cli(root, "lock", "--lock", str(LOCK))
    assert _check(cli, root)[0] == 0  # remembers the lock's parse and that its text is canonical
    zoo.retrain(root, 1)
    calls: dict[str, list[Any]] = {"hashed": [], "parsed": [], "rendered": []}

    def counted(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            calls[name].append(args[0])
            return real(*args)

        return call

    # where the check looks them up (each module imported the function by name)
    monkeypatch.setattr("baseline.verification.cache.sha256_file", counted("hashed", sha256_file))
    monkeypatch.setattr("baseline.project.lockfile.parse_toml", counted("parsed", parse_toml))
    monkeypatch.setattr("baseline.locker.memo.render_lock", counted("rendered", render_lock))
    code, out, err = _check(cli, root)
    assert code == 1 and "m0001: onnx.sha256" in out
    assert "locking 1 models (3 unchanged, answered from the cache): m0001" in err
    assert [Path(path).name for path in calls["hashed"]] == ["m0001.onnx"]
    assert calls["parsed"] == [] and calls["rendered"] == []
    # the answer is the one a check that parses and renders everything gives
    assert _check(cli, root, "--no-cache")[1] == out


PATH_CASES = [
    "models/m.onnx",
    "out/m.onnx",
    "inside/m.onnx",
    "models/../models/m.onnx",
    "models/link.onnx",
    ".",
    "deep/er/out/m.onnx",  # a link two folders down, resolved from its parent's real path
    "deep/er/in/m.onnx",
    "inside/er/out/m.onnx",  # through a folder link, then out
    "deep/missing/../er/in/m.onnx",
    "inside/er/in/m.onnx",  # plain names through two links that stay inside
    "models/er/in/link.onnx",  # a file link out, behind a folder link
    "deep/er/in/er/out/m.onnx",
    "up/root/models/m.onnx",  # out of the project and back in
    "up/root",  # the project folder itself, reached from outside
    "-models/m.onnx",  # names a plain path may not start with take the full check
    ".hidden/m.onnx",
]
"""Paths through folder and file links, in and out of the project (see `_linked_tree`)."""


@pytest.mark.parametrize("relative", PATH_CASES)
def test_project_paths_refuse_what_resolve_in_project_refuses(tmp_path: Path, relative: str) -> None:
    root = _linked_tree(tmp_path)
    paths = ProjectPaths(root)
    # the later answers come from what the first resolved, whether or not it names a file
    for file in (False, True, True, False):
        assert _answer(paths.resolve, relative, file) == _answer(_resolve_alone(root), relative, file)


def _linked_tree(tmp_path: Path) -> Path:
    """A project whose folder and file links lead in and out of it (`PATH_CASES` walk them)."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "models").mkdir(parents=True)
    outside.mkdir()
    (root / "models" / "m.onnx").write_bytes(b"x")
    (outside / "m.onnx").write_bytes(b"x")
    os.symlink(outside, root / "out")  # a folder that leaves the project
    os.symlink(root / "models", root / "inside")  # one that stays in it
    os.symlink(outside / "m.onnx", root / "models" / "link.onnx")  # a file that leaves it
    (root / "models" / "er").mkdir()
    os.symlink(root / "models", root / "deep")
    os.symlink(outside, root / "models" / "er" / "out")
    os.symlink(root / "models", root / "models" / "er" / "in")
    os.symlink(tmp_path, root / "up")
    (root / "models" / "er" / "m.onnx").write_bytes(b"x")
    return root


def test_one_project_paths_answers_every_path_as_resolve_in_project_does(tmp_path: Path) -> None:
    """Folders are kept across paths: answers must not depend on which path came first."""
    root = _linked_tree(tmp_path)
    for order in (PATH_CASES, PATH_CASES[::-1]):
        paths = ProjectPaths(root)
        for relative in order:
            for file in (False, True):
                expected = _answer(_resolve_alone(root), relative, file)
                assert _answer(paths.resolve, relative, file) == expected, (relative, file)


def _resolve_alone(root: Path) -> Callable[..., Path]:
    """`resolve_in_project` with `ProjectPaths.resolve`'s signature: the reference answer."""
    return functools.partial(resolve_in_project, root)


def _answer(resolve: Callable[..., Path], relative: str, file: bool) -> Path | str:
    """The resolved path, or the refusal's message."""
    try:
        return resolve(relative, "w", file=file)
    except ConfigError as error:
        return str(error)


def test_the_parsed_lock_is_kept_by_hash_and_an_edit_is_read_anew(project: Project) -> None:
    from baseline.project.lockfile import load_lock
    from baseline.verification.cache import ParsedLock, cache_root

    parsed = ParsedLock(cache_root(project.root), project.lock_path)
    first = load_lock(project.lock_path, parsed)
    assert parsed.path.is_file() and load_lock(project.lock_path, parsed) == first
    text = project.lock_path.read_text()
    edited = text.replace('captures = "captures"', 'captures = "elsewhere"')
    assert edited != text
    project.lock_path.write_text(edited)
    assert load_lock(project.lock_path, parsed).captures == "elsewhere", "new bytes, parsed anew"
    # a TOML date would come back from JSON as a string: such a document is never kept
    parsed.put("other", {"date": datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)})
    assert parsed.get("other") is None
    parsed.put("other", {"values": [1, 1.5, float("nan"), "x", True]})
    assert parsed.get("other") is not None


def test_no_cache_reads_the_lock_s_remembered_parse_and_key_recipes_but_no_result(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--no-cache` reruns every job, yet the lock's parse and the jobs' key recipes (both a
    function of the lock's exact bytes and baseline's code) are read: for a 1,000-model lock,
    ~0.8 s of TOML parsing and ~0.15 s of recipes, serial before any job could start."""
    from baseline.files.tomlfile import parse_toml
    from baseline.project import lockfile
    from baseline.verification import jobkeys

    parsed: list[str] = []
    real_parse, real_recipe = parse_toml, jobkeys.key_recipe

    def counted(raw: bytes, where: Path | str, *rest: Any) -> Any:
        parsed.append(str(where))
        return real_parse(raw, where, *rest)

    def recipe(ctx: Any, job: VerifyJob, shared: dict[str, Any]) -> Any:
        parsed.append(job.label)
        return real_recipe(ctx, job, shared)

    monkeypatch.setattr(lockfile, "parse_toml", counted)
    monkeypatch.setattr(jobkeys, "key_recipe", recipe)
    assert len(jobs_run(project, use_cache=False)) == 4 * 3
    parsed.clear()  # the first run may parse and make them (and remember them)
    assert len(jobs_run(project, use_cache=False)) == 4 * 3, "every job reran"
    assert parsed == [], "the lock and the recipes came from what was remembered"
    lock = project.lock_path
    lock.write_text(lock.read_text().replace('captures = "captures"', 'captures = "captures" '))
    jobs_run(project, use_cache=False)
    assert parsed[0] == str(lock) and len(parsed) == 1 + 4 * 3, "new bytes: parsed and made anew"


def test_diff_reads_through_the_parsed_lock_cache_and_sees_a_hand_edit(project: Project, cli) -> None:
    root = project.root
    (root / "before.lock").write_bytes((root / LOCK).read_bytes())
    for _ in range(2):  # the second diff reads both documents from the cache
        assert cli(root, "diff", "before.lock", str(LOCK))[:2] == (0, "no changes\n")
    text = (root / LOCK).read_text()
    digest = re.search(r'sha256 = "([0-9a-f]{64})"', text)
    assert digest is not None
    (root / LOCK).write_text(text.replace(digest.group(1), "0" * 64, 1))
    code, out, _ = cli(root, "diff", "before.lock", str(LOCK))
    assert code == 0 and "0000000000" in out and "1 changes" in out, out


@pytest.mark.toolkit
def test_lock_check_from_the_cache_reads_the_pinned_rknn_as_a_relock_would(demo: Path, cli) -> None:
    """A relock keeps the pinned `.rknn` when its fingerprint matches: the file on disk is an
    input of the job, so a changed one is not answered from the cache."""
    from tests.conftest import LOCK as DEMO_LOCK
    from tests.conftest import tensor_file

    check = ("lock", "--lock", str(DEMO_LOCK), "--check")
    assert cli(demo, *check)[0] == 0  # a real check, remembered
    code, _, err = cli(demo, *check)
    assert code == 0 and "locking 0 models (4 unchanged" in err
    artifact = tensor_file(demo, "classifier", "rk3588", ".rknn")
    artifact.write_bytes(artifact.read_bytes()[:-1] + b"\0")
    cached, real = cli(demo, *check), cli(demo, *check, "--no-cache")
    assert cached[0] == real[0] == 1 and "would change" in cached[1]
    # each conversion gives other volatile bytes, so the new file's hash differs between the two
    assert _without_hashes(cached[1]) == _without_hashes(real[1])
    assert "locking 1 models (3 unchanged, answered from the cache): classifier" in cached[2]


def _without_hashes(text: str) -> str:
    return re.sub(r"[0-9a-f]{12,}", "#", text)


# --- `--jobs 2` on worker processes: the CLI in a process of its own, as users run it ---

CLI_SCRIPT = """
import atexit, os, sys
from pathlib import Path

log = Path(sys.argv.pop(1))
# the CPUs the CLI may use when it exits: every one it had (a worker's share is given back)
atexit.register(lambda: log.with_suffix(".cpus").write_text(str(sorted(os.sched_getaffinity(0)))))
if sys.argv.pop(1) == "native-pool":  # a test process's state: numpy, onnxruntime and its threads
    import numpy as np
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 2
    session = onnxruntime.InferenceSession(sys.argv.pop(1), options, providers=["CPUExecutionProvider"])
    shapes = {i.name: [d if isinstance(d, int) else 1 for d in i.shape] for i in session.get_inputs()}
    session.run(None, {name: np.zeros(shape, np.float32) for name, shape in shapes.items()})
from baseline.verification import verify

real = verify.run_job

def logged(ctx, job):
    with log.open("a") as out:
        out.write(f"{os.getpid()} {job.label}|{sorted(os.sched_getaffinity(0))}\\n")
    return real(ctx, job)

verify.run_job = logged
from baseline import launch

sys.argv[0] = "baseline"
launch.main()
"""


def _verify_cli(
    root: Path, log: Path, jobs: int, *pool: str, cold: bool = True
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """A `verify --format json` (`--no-cache` if `cold`) as its own process (`baseline.launch.main`,
    as the command runs it); each job's process id and label go to `log`. `pool`: "native-pool"
    and a model."""
    log.unlink(missing_ok=True)
    command = [sys.executable, "-c", CLI_SCRIPT, str(log), *(pool or ["plain"])]
    command += ["verify", "--lock", str(LOCK), "--format", "json", "--jobs", str(jobs)]
    command += ["--no-cache"] if cold else []
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    env.pop("OPENBLAS_NUM_THREADS", None)  # the CLI limits it itself for a verify on workers
    run = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=240, check=False)
    return run, log.read_text().splitlines() if log.exists() else []


def _why(run: subprocess.CompletedProcess[str]) -> str:
    """What a failed verify said: its progress lines and the results that did not pass."""
    try:
        failed = [r for r in json.loads(run.stdout)["results"] if r["status"] in ("fail", "error")]
    except (ValueError, KeyError, TypeError):
        return run.stderr + run.stdout[-3000:]
    return run.stderr + json.dumps(failed, indent=1)[-6000:]


def _cache_entries(root: Path) -> dict[str, Any]:
    from baseline.project.paths import cache_root

    results = cache_root(root) / "results"
    stored = {p.name: _without_seconds(json.loads(p.read_text())) for p in sorted(results.glob("*.json"))}
    (batch,) = (cache_root(root) / "batches").glob("????????????????.json")  # key -> entry, for the next run
    stored["batch"] = {
        key: _without_seconds(json.loads(text)) for key, text in json.loads(batch.read_text()).items()
    }
    return stored


def _without_seconds(value: Any) -> Any:
    """A report or cache entry without its timings (how long a job took differs run to run)."""
    if isinstance(value, dict):
        return {key: _without_seconds(item) for key, item in value.items() if key != "seconds"}
    if isinstance(value, list):
        return [_without_seconds(item) for item in value]
    return value


def test_two_jobs_run_in_the_cli_and_a_forked_worker_with_one_job_s_report_and_cache(
    project: Project, tmp_path: Path
) -> None:
    """`verify --jobs 2` of a zoo: the CLI and one forked worker run the jobs (each with its
    own ONNX helper); the report, every cache entry and the batch are those of `--jobs 1`."""
    from baseline.project.paths import cache_root

    reports, stored, ran = {}, {}, {}
    for jobs in (1, 2):
        for entry in cache_root(project.root).rglob("*.json"):  # written anew by each run
            entry.unlink()
        run, ran[jobs] = _verify_cli(project.root, tmp_path / "ran.txt", jobs)
        assert run.returncode == 0, _why(run)
        reports[jobs] = _without_seconds(json.loads(run.stdout))
        stored[jobs] = _cache_entries(project.root)
    assert len(ran[1]) == len(ran[2]) == 4 * 3
    assert len({line.split()[0] for line in ran[1]}) == 1, "--jobs 1: the CLI alone"
    assert len({line.split()[0] for line in ran[2]}) == 2, "--jobs 2: the CLI and a worker"
    shares = {line.split()[0]: line.rsplit("|", 1)[1] for line in ran[2]}
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) > 1:  # each on a share of the CPUs of its own, together every CPU
        cpus = [set(json.loads(share)) for share in shares.values()]
        assert not cpus[0] & cpus[1] and cpus[0] | cpus[1] == set(allowed), shares
    assert (tmp_path / "ran.cpus").read_text() == str(allowed), "the CLI gets every CPU back"
    assert reports[1] == reports[2] and reports[2]["results"]
    assert stored[1] == stored[2] and len(stored[2]) > 4 * 3
    assert jobs_run(project) == [], "the next run is answered from what the workers stored"


def test_two_jobs_in_a_process_with_native_threads_run_on_threads_and_do_not_hang(
    project: Project, tmp_path: Path
) -> None:
    """A process that imported numpy and onnxruntime and keeps onnxruntime's thread pool (a
    long test process, a notebook) must not fork: a copy of a lock one of those threads held
    hung a worker's helper in a futex wait. The verify runs its jobs on threads, in time."""
    model = str(project.root / "models" / "m0000.onnx")
    run, ran = _verify_cli(project.root, tmp_path / "ran.txt", 2, "native-pool", model)
    assert run.returncode == 0, _why(run)
    assert json.loads(run.stdout)["results"] and len(ran) == 4 * 3
    assert len({line.split()[0] for line in ran}) == 1, "every job in the verifying process"


def test_jobs_the_cache_cannot_answer_run_on_a_worker_too(project: Project, tmp_path: Path) -> None:
    """Not only a cold verify: with a cache folder whose entries do not answer (every model
    retrained, a new baseline), `--jobs 2` still runs in two processes: the CLI is a process of
    one thread when its jobs start (the launcher keeps numpy's OpenBLAS to one thread)."""
    from baseline.project.paths import cache_root

    verify_project(project)  # a cache folder with results in it
    for folder in ("results", "batches"):
        for entry in (cache_root(project.root) / folder).glob("*.json"):
            entry.unlink()
    run, ran = _verify_cli(project.root, tmp_path / "ran.txt", 2, cold=False)
    assert run.returncode == 0, _why(run)
    assert len(ran) == 4 * 3 and len({line.split()[0] for line in ran}) == 2
