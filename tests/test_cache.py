"""Incremental verification: cached results, remembered file hashes, parallel models."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from baseline.gates.consistency import ConsistencyMetrics
from baseline.models.lock import Lock
from baseline.models.results import GateResult, LayerError, Status
from baseline.project.lockfile import load_lock
from baseline.verification import cache, verify
from baseline.verification.cache import FileHashes, ResultCache
from tests.conftest import LOCK, REPO, copy_demo_sources, tensor_file

VERIFY = ("verify", "--lock", str(LOCK), "--format", "json")


def spy(log: list[Any], note: Callable[..., Any], call: Callable[..., Any]) -> Callable[..., Any]:
    """`call`, with `note(*args)` appended to `log` first: which keys, files or jobs were used."""

    def wrapper(*args: Any) -> Any:
        log.append(note(*args))
        return call(*args)

    return wrapper


def results(out: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads(out)["results"]
    return found


@pytest.mark.toolkit
def test_second_verify_is_served_from_the_cache_without_numpy_onnx_or_gitpython(demo: Path, cli) -> None:
    code, first, _ = cli(demo, *VERIFY)
    assert code == 0 and list((demo / ".baseline-cache" / "results").glob("*.json"))
    # an exit handler: the command ends its process once they ran (`baseline.cli._exit_now`)
    probe = (
        "import atexit, sys, runpy; sys.argv = ['baseline', *sys.argv[1:]]\n"
        "HEAVY = ('numpy', 'onnx', 'onnxruntime', 'torch', 'rknn', 'git')  # git: GitPython, ~0.1 s\n"
        "heavy = lambda: [m for m in HEAVY if m in sys.modules]\n"
        "atexit.register(lambda: print('HEAVY', heavy(), file=sys.stderr))\n"
        "runpy.run_module('baseline', run_name='__main__')\n"
    )
    run = subprocess.run([sys.executable, "-c", probe, *VERIFY], cwd=demo, capture_output=True, text=True)
    assert run.returncode == 0 and "HEAVY []" in run.stderr
    assert results(run.stdout) == results(first)


@pytest.mark.toolkit
def test_a_changed_file_is_noticed_despite_the_cache(demo: Path, cli) -> None:
    assert cli(demo, *VERIFY)[0] == 0
    fixture = tensor_file(demo, "detector", "inputs")
    data = bytearray(fixture.read_bytes())
    data[-3] ^= 0xFF
    fixture.write_bytes(bytes(data))
    code, out, _ = cli(demo, *VERIFY)
    failed = [r for r in results(out) if r["status"] == "fail"]
    assert code == 1 and any(r["gate"] == "integrity" and r["model"] == "detector" for r in failed)


@pytest.mark.toolkit
def test_no_cache_reruns_everything(demo: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli(demo, *VERIFY)[0] == 0
    answers: list[Any] = []
    real = cache.ResultCache.get

    def recording(self: cache.ResultCache, key: str) -> Any:
        answers.append(real(self, key))
        return answers[-1]

    monkeypatch.setattr(cache.ResultCache, "get", recording)
    assert cli(demo, *VERIFY, "--no-cache")[0] == 0
    assert answers and all(answer is None for answer in answers), "every lookup misses"


@pytest.mark.toolkit
def test_parallel_models_give_the_same_report(demo: Path, cli) -> None:
    serial = cli(demo, *VERIFY, "--no-cache")
    parallel = cli(demo, *VERIFY, "--no-cache", "--jobs", "2")
    assert serial[0] == parallel[0] == 0
    verdicts = [
        [(r["model"], r["gate"], r["backend"], r["target"], r["status"]) for r in results(out)]
        for out in (serial[1], parallel[1])
    ]
    assert verdicts[0] == verdicts[1], "same gates, same order, same verdicts (timings differ)"


def test_unchanged_files_are_not_reread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = tmp_path / "model.onnx"
    file.write_bytes(b"x" * 1000)
    reads: list[Path] = []
    monkeypatch.setattr(cache, "sha256_file", spy(reads, lambda path: path, lambda path: "a" * 64))
    hashes = FileHashes(tmp_path / "hashes.json")
    assert hashes.sha256(file) == "a" * 64
    hashes.save()
    assert FileHashes(tmp_path / "hashes.json").sha256(file) == "a" * 64
    assert len(reads) == 1, "the second run trusted (size, mtime, inode)"
    file.write_bytes(b"y" * 1001)
    FileHashes(tmp_path / "hashes.json").sha256(file)
    assert len(reads) == 2


def test_a_shipped_context_reads_the_runs_hashes_once_per_process_and_never_across_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a Ray worker does with each job's pickled context: one parse of the hashes per run
    (not one per job), and `--no-cache`'s distrust kept on the other side."""
    import pickle

    from baseline.gates.context import VerifyContext

    file = tmp_path / "model.onnx"
    file.write_bytes(b"x" * 1000)
    stored = FileHashes(tmp_path / "hashes.json")
    stored.sha256(file)
    stored.save()
    loads: list[Path] = []
    monkeypatch.setattr(FileHashes, "_load", spy(loads, lambda self: self.path, FileHashes._load))
    lock = load_lock(REPO / LOCK)
    for read in (True, False):
        driver = FileHashes(tmp_path / "hashes.json", read=read)
        ctx = VerifyContext(project=cast(Any, None), lock=lock, hashes=driver)
        loads.clear()
        shipped = [pickle.loads(pickle.dumps(ctx)) for _ in range(5)]
        assert len(loads) == int(read), "parsed once for the five jobs of a run that reads them"
        assert len({id(job.hashes) for job in shipped}) == 1, "the jobs of one run share one copy"
        assert shipped[0].hashes.read is read and shipped[0].hashes.run == driver.run
        assert bool(shipped[0].hashes._entries) is read, "--no-cache trusts no stored hash there either"
    again = VerifyContext(project=cast(Any, None), lock=lock, hashes=FileHashes(tmp_path / "hashes.json"))
    assert pickle.loads(pickle.dumps(again)).hashes is not shipped[0].hashes, "a new run, a new copy"


def test_corrupt_cache_entries_are_misses_and_errors_are_not_cached(tmp_path: Path) -> None:
    store = ResultCache(tmp_path)
    (tmp_path / "k.json").write_text("{ truncated")
    assert store.get("k") is None
    error = GateResult(model="m", gate="compilable", status=Status.ERROR, summary="toolkit crashed")
    assert store.put("e", [error]) is False and store.get("e") is None
    nan = float("nan")
    layer = LayerError(
        op="Conv", name="c", entire_cosine=nan, entire_euclidean=nan, single_cosine=1, single_euclidean=0
    )
    ok = GateResult(
        model="m",
        gate="consistency",
        status=Status.PASS,
        summary="fine",
        metrics=ConsistencyMetrics(layers=[layer]),
    )
    assert store.put("o", [ok]) is True
    cached = store.get("o")
    assert cached is not None
    again = cached[0]
    assert again.summary == "fine" and isinstance(again.metrics, ConsistencyMetrics)
    assert math.isnan(again.metrics.layers[0].entire_cosine)  # NaN survives the cache


@pytest.mark.toolkit
def test_a_change_to_one_target_reruns_only_the_jobs_that_read_it(
    demo: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli(demo, *VERIFY)[0] == 0
    artifact = tensor_file(demo, "classifier", "rk3588-w8a8", ".rknn")
    artifact.write_bytes(artifact.read_bytes() + b"\0")
    ran: list[str] = []
    real = verify.run_job
    monkeypatch.setattr(verify, "run_job", spy(ran, lambda ctx, job: job.label, real))
    code, out, _ = cli(demo, *VERIFY)
    assert code == 1 and any(r["gate"] == "integrity" and r["status"] == "fail" for r in results(out))
    # integrity, and the artifact check of that target (it fingerprints the pinned .rknn again when
    # the lock's fingerprint is not today's), read the file; the other target was cached
    assert sorted(ran) == ["classifier checks", "classifier rknn-sim/rk3588-w8a8"], ran


@pytest.mark.toolkit
def test_lock_with_parallel_jobs_writes_the_same_lock(demo: Path, cli) -> None:
    before = (demo / LOCK).read_bytes()
    code, out, _ = cli(demo, "lock", "--lock", str(LOCK), "--jobs", "2")
    assert code == 0 and "unchanged" in out and (demo / LOCK).read_bytes() == before


@pytest.mark.toolkit
def test_parallel_lock_of_a_fresh_project_matches_a_serial_one(tmp_path: Path, cli) -> None:
    """No lock yet, two jobs at once: it used to fail with a vanished `.rknn` (two simulator
    instances raced; the loser's scratch folder was removed under its caller)."""
    (tmp_path / "serial").mkdir()
    (tmp_path / "parallel").mkdir()
    serial, parallel = copy_demo_sources(tmp_path / "serial"), copy_demo_sources(tmp_path / "parallel")
    assert cli(serial, "lock", "--lock", str(LOCK), "--jobs", "1")[0] == 0
    code, _, err = cli(parallel, "lock", "--lock", str(LOCK), "--jobs", "2")
    assert code == 0, err
    locked = [_without_artifact_bytes(load_lock(root / LOCK)) for root in (serial, parallel)]
    assert locked[0] == locked[1]


def _without_artifact_bytes(lock: Lock) -> dict[str, Any]:
    """A lock as data, with each `.rknn` pin's hash and size left out: two fresh conversions
    differ in a few volatile bytes (the fingerprint, which masks them, stays compared)."""
    data = lock.model_dump(mode="json")
    for model in data["models"]:
        for conversion in model["conversions"]:
            conversion["artifact"] = {"path": conversion["artifact"]["path"].rsplit(".", 2)[0]}
    return data


@pytest.mark.toolkit
def test_parallel_jobs_start_longest_first_by_their_last_duration(
    demo: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli(demo, *VERIFY, "--no-cache")[0] == 0
    times_path = demo / ".baseline-cache" / "job-times.json"
    times = json.loads(times_path.read_text())
    assert times["classifier rknn-sim/rk3588"] > 0, "every job that ran was timed"
    times = {label: 0.0 for label in times} | {"overflow rknn-sim/rk3588": 9.0, "detector onnxruntime": 5.0}
    del times["nms_head checks"]  # never timed: it may be long, so it goes first
    times_path.write_text(json.dumps(times))
    ran: list[str] = []
    real = verify.run_job
    monkeypatch.setattr(verify, "run_job", spy(ran, lambda ctx, job: job.label, real))
    assert cli(demo, *VERIFY, "--no-cache", "--jobs", "2")[0] == 0
    # two threads take them in this order; which of two starting together records first may vary
    assert set(ran[:3]) == {"nms_head checks", "overflow rknn-sim/rk3588", "detector onnxruntime"}
    ran.clear()
    assert cli(demo, *VERIFY, "--no-cache")[0] == 0  # one at a time: the plan's order
    assert ran == [job.label for job in verify.plan_jobs(load_lock(demo / LOCK).models)]


def test_the_cache_folder_ignores_itself_in_git(tmp_path: Path) -> None:
    from baseline.verification.cache import GITIGNORE, ignore_in_git

    root = tmp_path / ".baseline-cache"
    ignore_in_git(root)
    assert (root / ".gitignore").read_bytes() == GITIGNORE
    (root / ".gitignore").write_text("results/\n")  # the team's own choice stays
    ignore_in_git(root)
    assert (root / ".gitignore").read_text() == "results/\n"


@pytest.mark.toolkit
def test_a_fully_cached_verify_needs_no_toolkit_environment(
    demo: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CI machine that restored the cache but not the toolkit's 1.5 GB environment: every job is
    answered (the key names the lock's toolkit pin, not the installed packages) and nothing is
    installed."""
    from baseline.verification import jobkeys

    assert cli(demo, *VERIFY)[0] == 0
    installs: list[set[str]] = []
    monkeypatch.setattr(jobkeys, "find_toolchain", lambda version: None)  # not installed here
    monkeypatch.setattr(
        verify, "ensure_toolchains", lambda versions, progress: installs.append(set(versions))
    )
    code, out, err = cli(demo, *VERIFY)
    assert code == 0, out + err
    assert installs == [set()] and "answered from the cache" in err


def test_an_accuracy_analysis_is_kept_by_its_run_s_key_and_a_refusal_is_not(tmp_path: Path) -> None:
    """`VerifyContext.analyse` asks the toolkit once per run's inputs; a judging edit reads it back."""
    from baseline.errors import BaselineError
    from baseline.verification.runcache import RunCache

    runs = RunCache(tmp_path / "runs", FileHashes(), cast(Any, None))  # no pinned file is read here
    layer = LayerError(
        op="Conv",
        name="scaled",
        entire_cosine=0.5,
        entire_euclidean=1.0,
        single_cosine=0.9,
        single_euclidean=0.1,
    )
    asked: list[str] = []

    def toolkit(answer: list[LayerError]) -> Callable[[], list[LayerError]]:
        def analyse() -> list[LayerError]:
            asked.append("analyse")
            return answer

        return analyse

    def refused() -> list[LayerError]:
        raise BaselineError("accuracy_analysis failed: ...")

    assert runs.kept_analysis_or_run("run-a", toolkit([layer])) == [layer]
    assert runs.kept_analysis_or_run("run-a", toolkit([])) == [layer] and len(asked) == 1
    assert runs.kept_analysis_or_run("run-b", toolkit([])) == [] and len(asked) == 2  # other inputs
    with pytest.raises(BaselineError):
        runs.kept_analysis_or_run("run-c", refused)
    assert runs.kept_analysis_or_run("run-c", toolkit([layer])) == [layer]  # the refusal was not kept
    fresh = RunCache(tmp_path / "runs", FileHashes(), cast(Any, None), read=False)
    assert fresh.kept_analysis_or_run("run-a", toolkit([])) == []  # --no-cache asks again
    assert runs.kept_analysis_or_run("run-a", toolkit([layer])) == []  # and keeps the fresh answer


def test_package_versions_are_read_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The backend run cache's key asks for three package versions on every run; each read of
    a package's METADATA cost ~1 ms, a fifth of a small model's job."""
    from importlib import metadata

    from baseline import versions

    reads: list[str] = []
    monkeypatch.setattr(metadata, "version", spy(reads, lambda name: name, lambda name: "1.2.3"))
    versions.package_version.cache_clear()
    try:
        first = versions.host_toolchain()
        assert versions.host_toolchain() == first and versions.package_version("numpy") == "1.2.3"
        assert sorted(reads) == ["numpy", "onnx", "onnxruntime"], "each package read once"
    finally:
        versions.package_version.cache_clear()  # the real versions for the tests after
