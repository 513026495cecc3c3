"""Issue 14: what an untrusted pull request can do to `baseline verify`.

Each test edits only what a pull request could commit (the lock, captures, tensor files) and
checks that verify refuses it in one line with exit code 2, instead of turning green or
reading and writing outside the project.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from tests.conftest import LOCK, one_line_error

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

LOCK_ARGS = ("--lock", str(LOCK))


def edit_lock(root: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Rewrite the lock with `change` applied, leaving its inputs_hash as it was."""
    path = root / LOCK
    data = tomllib.loads(path.read_text())
    change(data)
    path.write_text(tomli_w.dumps(data))


def model(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(entry for entry in data["models"] if entry["name"] == name)


def assert_refused(code: int, out: str, err: str, *needles: str) -> None:
    message = (out + err).strip()
    assert code == 2, message
    error = one_line_error(message)
    for needle in needles:
        assert needle in error, message


def add_expect_fail(data: dict[str, Any]) -> None:
    model(data, "classifier")["expect_fail"] = [{"gate": "drift", "reason": "injected"}]


def loosen_tolerance(data: dict[str, Any]) -> None:
    model(data, "classifier")["tolerances"]["probs"]["drift"]["atol"] = 1.0


def drop_model(data: dict[str, Any]) -> None:
    data["models"] = [entry for entry in data["models"] if entry["name"] != "overflow"]


def empty_models(data: dict[str, Any]) -> None:
    data["models"] = []


def duplicate_model(data: dict[str, Any]) -> None:
    # the first entry is what `lock.model()` finds; the tampered second one was never checked
    data["models"].insert(0, dict(model(data, "detector")))


def extra_backend(data: dict[str, Any]) -> None:
    model(data, "detector")["backends"] = ["onnxruntime"]


def toolkit_setting(data: dict[str, Any]) -> None:
    model(data, "detector")["toolkit"]["unknown_errors"] = "warn"
    model(data, "detector")["toolkit"]["timeout"] = 1e9


def captures_elsewhere(data: dict[str, Any]) -> None:
    data["captures"] = "fixtures"


@pytest.mark.parametrize(
    ("change", "needles"),
    [
        (add_expect_fail, ("models.classifier.expect_fail", "baseline lock")),
        (loosen_tolerance, ("models.classifier.tolerances", "baseline lock")),
        (drop_model, ("'overflow'", "missing from the lock", "baseline lock")),
        (empty_models, ("missing from the lock", "baseline lock")),
        (duplicate_model, ("'detector'", "more than once", "baseline lock")),
        (extra_backend, ("models.detector.backends",)),
        (toolkit_setting, ("models.detector.toolkit",)),
        (captures_elsewhere, ("captures",)),
    ],
)
@pytest.mark.toolkit
def test_lock_only_edits_of_rules_are_refused(demo: Path, cli, change, needles) -> None:
    edit_lock(demo, change)
    code, out, err = cli(demo, "verify", *LOCK_ARGS)
    assert_refused(code, out, err, str(LOCK), *needles)


@pytest.mark.toolkit
def test_a_fresh_lock_still_follows_its_intent(demo: Path) -> None:
    from baseline.project.intent import load_intent
    from baseline.project.layout import Project
    from baseline.project.lockcheck import check_lock_follows_intent
    from baseline.project.lockfile import load_lock

    project = Project.locate(demo / LOCK)
    check_lock_follows_intent(project, load_lock(project.lock_path), load_intent(project.intent_path))


@pytest.mark.parametrize("name", ["../escape", "a/b", ".hidden", "-flag", "x" * 129, "a\nPASSED"])
@pytest.mark.toolkit
def test_unsafe_model_names_in_the_lock_are_refused(demo: Path, cli, name: str) -> None:
    edit_lock(demo, lambda data: model(data, "detector").update(name=name))
    code, out, err = cli(demo, "verify", *LOCK_ARGS)
    assert_refused(code, out, err, str(LOCK), "models")
    assert not (demo.parent / "escape").exists()


def test_path_components_are_checked_before_use() -> None:
    from baseline.errors import ConfigError
    from baseline.project.paths import checked_name

    assert checked_name("rk3588-w8a8", "here") == "rk3588-w8a8"
    with pytest.raises(ConfigError, match="not a valid name"):
        checked_name("../x", "here")


def _project_and_lock(root: Path):
    from baseline.project.layout import Project
    from baseline.project.lockfile import load_lock

    project = Project.locate(root / LOCK)
    return project, load_lock(project.lock_path)


@pytest.mark.toolkit
def test_capture_symlink_leaving_the_project_is_not_hashed(demo: Path, tmp_path: Path) -> None:
    from baseline.errors import ConfigError
    from baseline.gates import VerifyContext
    from baseline.verification.cache import FileHashes
    from baseline.verification.jobkeys import capture_hashes

    project, lock = _project_and_lock(demo)
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours")
    folder = demo / "captures" / "classifier" / "rk3588"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text("{}")
    ctx = VerifyContext(project=project, lock=lock, hashes=FileHashes())
    [classifier] = [m for m in lock.models if m.name == "classifier"]
    assert list(capture_hashes(ctx, classifier.name, ("rk3588",))) == ["rk3588/manifest.json"]
    (folder / "outputs.npz").symlink_to(secret)
    with pytest.raises(ConfigError, match="leaves the project"):
        capture_hashes(ctx, classifier.name, ("rk3588",))


@pytest.mark.toolkit
def test_capture_folder_symlinked_out_of_the_project_is_refused(demo: Path, tmp_path: Path) -> None:
    from baseline.board.capture import capture_dir
    from baseline.errors import ConfigError

    project, lock = _project_and_lock(demo)
    (demo / "captures").mkdir()
    (demo / "captures" / "classifier").symlink_to(tmp_path)
    with pytest.raises(ConfigError, match="leaves the project"):
        capture_dir(project, lock, "classifier", "rk3588")


@pytest.mark.toolkit
def test_fifos_and_devices_in_captures_are_refused(demo: Path) -> None:
    import os

    from baseline.board.capture import capture_files
    from baseline.errors import ConfigError

    project, _ = _project_and_lock(demo)
    folder = demo / "captures" / "classifier"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "outputs.npz")  # reading it would block verify forever
    with pytest.raises(ConfigError, match="not a regular file"):
        capture_files(project, folder)
    (folder / "outputs.npz").unlink()
    (folder / "zero").symlink_to("/dev/zero")
    with pytest.raises(ConfigError):
        capture_files(project, folder)


@pytest.mark.toolkit
def test_capture_bundle_replaces_symlinks_instead_of_writing_through(demo: Path, cli, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    bundle = demo / "captures" / "classifier" / "rk3588"
    bundle.mkdir(parents=True)
    (bundle / "model.rknn").symlink_to(victim)
    code, out, err = cli(demo, "capture", "--model", "classifier", "--target", "rk3588", *LOCK_ARGS)
    assert code == 0, out + err
    assert victim.read_text() == "precious"
    assert not (bundle / "model.rknn").is_symlink()


def _npy_header(shape: tuple[int, ...], dtype: str = "<f4") -> bytes:
    import io

    import numpy as np

    buffer = io.BytesIO()
    header = {"descr": dtype, "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue()


def test_a_tiny_npz_claiming_terabytes_is_one_line_error(tmp_path: Path) -> None:
    import zipfile

    from baseline.errors import InputError
    from baseline.files.tensors import load_tensors

    path = tmp_path / "forged.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("image.npy", _npy_header((1 << 40,)))  # 4 TiB of float32, no data
    assert path.stat().st_size < 400
    with pytest.raises(InputError, match="above the limit") as raised:
        load_tensors(path)
    assert "\n" not in str(raised.value) and str(path) in str(raised.value)


def test_a_npy_header_larger_than_its_file_is_refused(tmp_path: Path) -> None:
    from baseline.errors import InputError
    from baseline.files.tensors import load_tensors

    path = tmp_path / "short.npy"
    path.write_bytes(_npy_header((1000, 1000)) + b"\0" * 16)
    with pytest.raises(InputError, match="holds only"):
        load_tensors(path)


def test_a_zip_bomb_is_refused_before_inflating(tmp_path: Path, monkeypatch) -> None:
    import io
    import zipfile

    import numpy as np

    from baseline.errors import InputError
    from baseline.files import tensors

    path = tmp_path / "bomb.npz"
    zeros = io.BytesIO()
    np.save(zeros, np.zeros((16, 1024, 1024), dtype=np.float32))  # 64 MiB of zeros
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for index in range(4):
            archive.writestr(f"a{index}.npy", zeros.getvalue())
    assert path.stat().st_size < 1 << 20  # ~260 KB that inflate to 256 MiB
    monkeypatch.setattr(tensors, "MAX_TENSOR_FILE_BYTES", 128 << 20, raising=False)
    monkeypatch.setattr(np.lib.format, "read_array", _never_inflate)
    with pytest.raises(InputError, match="inflate to"):
        tensors.load_tensors(path)


def _never_inflate(*args: object, **kwargs: object) -> None:
    raise AssertionError("the arrays were inflated before their size was checked")


def test_the_element_limit_applies_to_pinned_files(tmp_path: Path) -> None:
    import numpy as np

    from baseline.errors import InputError
    from baseline.files.tensors import MAX_FIXTURE_ELEMENTS, load_tensors

    path = tmp_path / "pinned.npy"  # shape over the limit, stored data present but sparse
    header = _npy_header((MAX_FIXTURE_ELEMENTS + 1,), "|u1")
    with path.open("wb") as stream:
        stream.write(header)
        stream.truncate(len(header) + MAX_FIXTURE_ELEMENTS + 1)
    with pytest.raises(InputError, match="above the limit"):
        load_tensors(path)
    small = tmp_path / "small.npy"
    np.save(small, np.arange(6, dtype=np.float32).reshape(2, 3))
    assert load_tensors(small)["small"].shape == (2, 3)


def _verify_in_subprocess(root: Path, *args: str) -> tuple[int, str]:
    """verify in its own process, bounded in time and memory: old code hung or ate RAM here."""
    import resource
    import subprocess

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    result = subprocess.run(
        [sys.executable, "-m", "baseline", "verify", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=limit_memory,
    )
    return result.returncode, result.stdout + result.stderr


@pytest.mark.toolkit
def test_a_lock_symlinked_to_dev_zero_is_refused(demo: Path) -> None:
    (demo / LOCK).unlink()
    (demo / LOCK).symlink_to("/dev/zero")
    code, message = _verify_in_subprocess(demo, *LOCK_ARGS)
    assert_refused(code, message, "", str(LOCK), "not a regular file")


@pytest.mark.toolkit
def test_an_intent_that_is_a_fifo_is_refused_without_hanging(demo: Path) -> None:
    import os

    intent = demo / LOCK.with_suffix(".toml")
    intent.unlink()
    os.mkfifo(intent)
    code, message = _verify_in_subprocess(demo, *LOCK_ARGS)
    assert_refused(code, message, "", "baseline.toml", "not a regular file")


@pytest.mark.toolkit
def test_a_huge_lock_is_refused(demo: Path, cli) -> None:
    with (demo / LOCK).open("ab") as stream:
        stream.truncate(65 << 20)  # sparse: no disk used
    code, out, err = cli(demo, "verify", *LOCK_ARGS)
    assert_refused(code, out, err, str(LOCK), "larger than")


def test_atomic_writes_never_touch_the_process_umask(tmp_path: Path, monkeypatch) -> None:
    import os
    import stat

    from baseline.files.fsutil import write_atomic

    previous = os.umask(0o027)
    try:

        def forbidden(mask: int) -> int:
            raise AssertionError("os.umask flips the umask of every thread")

        monkeypatch.setattr(os, "umask", forbidden)
        write_atomic(tmp_path / "a" / "file.bin", b"data")
    finally:
        monkeypatch.undo()
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "a" / "file.bin").stat().st_mode) == 0o640
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["file.bin"]


def test_a_same_size_rewrite_with_mtime_restored_is_rehashed(tmp_path: Path) -> None:
    import os
    import time

    from baseline.verification.cache import FileHashes

    file = tmp_path / "model.onnx"
    file.write_bytes(b"a" * 1000)
    hashes = FileHashes(tmp_path / "hashes.json")
    before = hashes.sha256(file)
    hashes.save()
    stat = file.stat()
    time.sleep(0.05)  # ctime moves with the coarse kernel clock
    with file.open("r+b") as stream:  # same inode, same size
        stream.write(b"b" * 1000)
    os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # mtime put back, as `touch -d` would
    assert file.stat().st_mtime_ns == stat.st_mtime_ns and file.stat().st_ino == stat.st_ino
    after = FileHashes(tmp_path / "hashes.json").sha256(file)
    assert after != before


def test_cache_writes_are_best_effort(tmp_path: Path) -> None:
    from baseline.models.results import GateResult, Status
    from baseline.verification.cache import FileHashes, JobTimes, ResultCache

    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache folder should be")  # even root cannot mkdir here
    file = tmp_path / "f.bin"
    file.write_bytes(b"x")
    hashes = FileHashes(blocked / "file-hashes.json")
    hashes.sha256(file)
    hashes.save()
    times = JobTimes(blocked / "job-times.json")
    times.record("job", 1.0)
    times.save()
    ok = GateResult(model="m", gate="drift", status=Status.PASS, summary="fine")
    assert ResultCache(blocked / "results").put("k", [ok]) is False


@pytest.mark.toolkit
def test_no_cache_ignores_remembered_file_hashes(demo: Path, monkeypatch) -> None:
    from baseline.verification import verify
    from baseline.verification.cache import FileHashes

    made: list[FileHashes] = []

    def remembering(path: Path | None, read: bool = True) -> FileHashes:
        made.append(FileHashes(path, read=read))
        return made[-1]

    monkeypatch.setattr(verify, "FileHashes", remembering)
    monkeypatch.setattr(verify, "run_jobs", lambda *args, **kwargs: [])
    monkeypatch.setattr(verify, "ensure_toolchains", lambda *args, **kwargs: None)
    project, _ = _project_and_lock(demo)
    verify.verify_project(project, only=["classifier"], options=verify.VerifyOptions(use_cache=True))
    assert made[0].sha256(demo / "fixtures" / "demo" / "classifier.onnx") is not None
    made[0].save()  # a normal run left the hashes on disk
    made.clear()
    verify.verify_project(project, only=["classifier"], options=verify.VerifyOptions(use_cache=False))
    assert made and made[0]._entries == {}, "--no-cache reads none of them (and stores fresh ones)"


@pytest.mark.toolkit
def test_verify_no_cache_in_a_checkout_where_nothing_can_be_written(demo: Path, cli) -> None:
    shutil.rmtree(demo / ".baseline-cache", ignore_errors=True)  # the writers' lock of the lock that made it
    (demo / ".baseline-cache").write_text("blocks the cache folder, as a read-only checkout would")
    code, out, err = cli(demo, "verify", *LOCK_ARGS, "--no-cache", "--model", "detector")
    assert code == 0, out + err
    code, out, err = cli(demo, "verify", *LOCK_ARGS, "--model", "detector")
    assert code == 0, out + err


def test_interpolated_strings_cannot_forge_report_lines() -> None:
    import io

    from rich.console import Console

    from baseline.models.results import GateResult, Report, Status
    from baseline.report import render_text

    forged = "drift ok\nPASSED: 9 pass\n::error::owned \x1b[2J"
    result = GateResult(model="m", gate="drift", status=Status.FAIL, summary=forged, details=[forged])
    buffer = io.StringIO()
    console = Console(file=buffer, width=400, force_terminal=False)
    for line in render_text(Report(lock="baseline.lock", results=[result])):
        console.print(line)
    lines = buffer.getvalue().splitlines()
    assert not any(line.startswith(("PASSED", "::error")) for line in lines), lines
    assert "\x1b" not in buffer.getvalue()
    assert "\\n" in lines[1]


def test_check_keeps_its_rule_tags(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conftest import REPO

    # an empty cache: after `nox -s demo` the checkout's own holds this machine's conversions
    monkeypatch.setenv("BASELINE_CACHE", str(tmp_path))

    _, out, _ = cli(REPO, "check", "fixtures/demo/nms_head.onnx", "--target", "rk3588")
    assert "[data-dependent-op] node" in out, out  # the tag was read as rich markup and swallowed
