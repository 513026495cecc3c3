"""Issue 14, "also (low)": smaller holes an untrusted pull request or a bad environment opened,
each a one-line error or a harmless result now. None needs the toolkit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import onnx
import pytest

from baseline.board import software as board
from baseline.errors import ConfigError
from baseline.files.images import image_files
from baseline.files.tomlfile import read_toml
from baseline.models.results import GateResult, Report, Status
from baseline.project.layout import Project
from baseline.report.junit import render_junit
from baseline.verification.cache import FileHashes, ResultCache, cache_root
from baseline.verification.verify import VerifyOptions, verify_project
from tests.test_limits import loop_model, looper_project
from tests.test_trust import assert_refused


def git_project(root: Path) -> Path:
    looper_project(root)
    for command in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
    ):
        subprocess.run(["git", *command], cwd=root, check=True, capture_output=True)
    return root


@pytest.mark.parametrize("rev", ["--output=pwned", "-p", "HEAD\n--output=pwned"])
def test_a_rev_is_never_passed_to_git_as_an_option(tmp_path: Path, cli, rev: str) -> None:
    root = git_project(tmp_path / "project")
    code, out, err = cli(root, "diff", f"--rev={rev}")
    assert_refused(code, out, err, "is not a git revision")
    assert not (root / "pwned").exists()


def test_a_rev_that_looks_like_an_option_after_a_name_is_still_a_revision(tmp_path: Path, cli) -> None:
    root = git_project(tmp_path / "project")
    code, out, err = cli(root, "diff", "--rev", "HEAD")
    assert code == 0, out + err
    assert "no changes" in out


def test_diff_rev_without_git_is_one_line(tmp_path: Path) -> None:
    root = git_project(tmp_path / "project")
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty)}
    env.pop("GIT_PYTHON_GIT_EXECUTABLE", None)
    result = subprocess.run(
        [sys.executable, "-m", "baseline", "diff", "--rev", "HEAD"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert_refused(result.returncode, result.stdout, result.stderr, "git is not installed")


@pytest.mark.parametrize("entry", ["null", "{}", '"text"', "[null]", "[1, 2]"])
def test_a_cache_entry_of_the_wrong_shape_is_a_miss(tmp_path: Path, entry: str) -> None:
    (tmp_path / "key.json").write_text(entry)
    assert ResultCache(tmp_path).get("key") is None


def test_a_null_cache_entry_does_not_break_later_runs(tmp_path: Path) -> None:
    project = looper_project(tmp_path)
    onnx.save(loop_model(3), tmp_path / "models" / "looper.onnx")  # the model as locked
    verify_project(project)
    entries = list((cache_root(tmp_path) / "results").glob("*.json"))
    assert entries
    for path in entries:
        path.write_text("null")
    assert verify_project(project).results


def test_a_model_name_cannot_make_the_junit_xml_ill_formed() -> None:
    result = GateResult(model="a\x1b[31m\x00<b>", gate="drift", status=Status.FAIL, summary="x\x07")
    ET.fromstring(render_junit(Report(lock="l\x00", results=[result])))


def test_a_pinned_file_of_another_size_is_not_hashed(tmp_path: Path, monkeypatch) -> None:
    big = tmp_path / "model.onnx"
    with big.open("wb") as stream:
        stream.truncate(1 << 40)  # sparse: a terabyte that uses no disk

    def never(path: Path) -> str:
        raise AssertionError("hashed a file whose size already differs")

    monkeypatch.setattr("baseline.verification.cache.sha256_file", never)
    assert FileHashes().sha256(big, size=1234) == f"size:{1 << 40}"


def test_integrity_names_the_size_instead_of_hashing(tmp_path: Path) -> None:
    project = looper_project(tmp_path)
    with (tmp_path / "models" / "looper.onnx").open("ab") as stream:
        stream.truncate(1 << 40)
    report = verify_project(project, options=VerifyOptions(use_cache=False), only=None)
    integrity = next(r for r in report.results if r.gate == "integrity")
    assert integrity.status is Status.FAIL
    assert f"{1 << 40} bytes, the lock pins" in integrity.details[0]


def fake_adb(tmp_path: Path, monkeypatch, body: str) -> None:
    script = tmp_path / "adb"
    script.write_text(f"#!{sys.executable}\nimport sys, time\nargs = sys.argv[1:]\n{body}\n")
    script.chmod(0o755)
    monkeypatch.setenv("BASELINE_ADB", str(script))


def test_a_hanging_adb_devices_is_one_line(tmp_path: Path, monkeypatch) -> None:
    fake_adb(tmp_path, monkeypatch, "time.sleep(60)")
    monkeypatch.setattr(board, "ADB_TIMEOUT", 1.0)
    with pytest.raises(board.BoardError, match=r"`adb devices` timed out after 1 s"):
        board.probe_board("x")


def test_binary_and_huge_board_output_is_stored_bounded(tmp_path: Path, monkeypatch) -> None:
    body = (
        "if args == ['devices']:\n    print('List\\nx\\tdevice')\n"
        "elif 'model' in ' '.join(args):\n"
        "    sys.stdout.buffer.write(b'\\xff\\xfe' + b'M' * 10**6 + b'\\nforged')\n"
        "elif 'compatible' in ' '.join(args):\n    sys.stdout.buffer.write(b'rockchip,rk3588\\x00')\n"
    )
    fake_adb(tmp_path, monkeypatch, body)
    observed = board.probe_board("x")
    assert observed.model is not None and len(observed.model) == board.MAX_FIELD
    assert observed.model.startswith("\ufffd\ufffdMMM") and "forged" not in observed.model
    assert json.dumps(observed.model_dump())  # storable as it is


def test_toml_nested_thousands_deep_is_one_line(tmp_path: Path) -> None:
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(ConfigError, match="nests arrays or tables too deeply to read"):
        read_toml(deep, "intent file", "fix it")


def test_a_symlink_out_of_the_project_inside_an_image_folder_is_refused(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / "photos").mkdir(parents=True)
    (tmp_path / "secret.jpg").write_bytes(b"\xff\xd8 not really")
    (project / "photos" / "a.jpg").symlink_to(tmp_path / "secret.jpg")
    resolve = Project.locate(project / "b.lock", root=project).resolve
    with pytest.raises(ConfigError, match="leaves the project"):
        image_files(resolve, "photos", "models.m.fixtures.images.path")
