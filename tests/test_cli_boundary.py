"""The CLI's one error boundary: any command's BaselineError or OSError is one line and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from baseline.toolchain import provision
from tests.conftest import REPO


def test_a_baseline_error_is_one_line_on_stderr_and_exit_2(tmp_path: Path, cli) -> None:
    code, out, err = cli(tmp_path, "diff", "old.lock", "new.lock")
    assert code == 2 and out == ""
    assert err.startswith("error: old.lock: lock not found") and err.count("\n") == 1


def test_an_os_error_in_any_command_is_one_line_naming_the_file(
    tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreadable() -> list[provision.Toolchain]:
        raise PermissionError(13, "Permission denied", "/cache/toolchains")

    monkeypatch.setattr(provision, "list_toolchains", unreadable)
    code, _, err = cli(tmp_path, "toolchain", "list")
    assert (code, err) == (2, "error: /cache/toolchains: Permission denied\n")


def test_an_ascii_terminal_gets_escapes_not_a_unicode_traceback(tmp_path: Path) -> None:
    """`check` cites its sources with `§`; on a terminal that cannot encode it (LANG=C, a CI
    runner) the character is escaped and the command ends as it would anywhere. (An empty cache:
    after `nox -s demo` the checkout's own holds this machine's conversions, which `check` cites
    instead of the shipped table.)"""
    done = subprocess.run(
        [sys.executable, "-m", "baseline", "check", "fixtures/demo/nms_head.onnx"],
        cwd=REPO,
        env={**os.environ, "PYTHONIOENCODING": "ascii", "BASELINE_CACHE": str(tmp_path)},
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 1 and b"Traceback" not in done.stderr, done.stderr[-300:]
    assert b"S2 \\xa77.5" in done.stdout
