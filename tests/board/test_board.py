"""Board probing through a stand-in adb (no board exists on these machines)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from baseline.board.software import parse_soc, parse_version, probe_board
from baseline.errors import BaselineError
from baseline.project.lockfile import load_lock
from tests.conftest import LOCK

FAKE_ADB = Path(__file__).with_name("fake_adb.py")


@pytest.fixture(autouse=True)
def stand_in_adb(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BASELINE_ADB", str(FAKE_ADB))


def test_rk3588_linux_board() -> None:
    board = probe_board("rk3588-0001")
    assert (board.soc, board.driver, board.runtime_library, board.runtime, board.rknn_server) == (
        "rk3588",
        "0.9.8",
        "librknnrt",
        "2.3.0",
        "2.3.0",
    )
    assert board.kernel == "5.10.160" and board.model == "Rockchip RK3588 EVB1 LP4 V10 Board"
    assert board.runtime_sha256 is not None and len(board.runtime_sha256) == 64


def test_rv1106_uses_the_mini_runtime_under_oem() -> None:
    board = probe_board("rv1106-0002")
    assert (board.soc, board.driver, board.runtime_library, board.runtime, board.rknn_server) == (
        "rv1106",
        "0.9.2",
        "librknnmrt",
        "1.6.0",
        "1.6.0",
    )


def test_detached_or_offline_board_is_a_clear_error() -> None:
    with pytest.raises(BaselineError, match="offline-0003 is not attached"):
        probe_board("offline-0003")


def test_parsers() -> None:
    assert parse_soc("rockchip,rk3566-box-demo\x00rockchip,rk3566\x00") == "rk3566"
    assert parse_soc("vendor,board\x00") is None
    assert parse_version("[    2.1] RKNPU driver: v0.9.6", r"RKNPU driver:?\s*") == "0.9.6"
    assert parse_version("rknn_server version: 2.0.0b0 (x)", r"rknn_server version:?\s*") == "2.0.0b0"


@pytest.mark.toolkit
def test_env_device_records_the_board_in_the_lock(demo: Path, cli) -> None:
    code, out, _ = cli(demo, "env", "--device", "rv1106-0002", "--format", "json")
    assert code == 0 and json.loads(out)["runtime"] == "1.6.0"
    code, _, _ = cli(demo, "env", "--device", "rk3588-0001", "--record", "--lock", str(LOCK))
    assert code == 0
    boards = load_lock(demo / LOCK).boards
    assert [(b.serial, b.runtime) for b in boards] == [("rk3588-0001", "2.3.0")]
    # the observed runtime 2.3.0 is older than the 2.5.0 toolkit and differs from the declared one
    code, out, _ = cli(demo, "verify", "--lock", str(LOCK), "--model", "detector", "--format", "json")
    compat = next(r for r in json.loads(out)["results"] if r["gate"] == "compat")
    assert code == 1 and compat["status"] == "fail"
    assert "the intent declares runtime 2.5.0, board rk3588-0001 has 2.3.0" in compat["summary"]
    assert any("rule same-version" in line for line in compat["details"])


@pytest.mark.toolkit
def test_relock_keeps_observed_boards(demo: Path, cli) -> None:
    cli(demo, "env", "--device", "rk3588-0001", "--record", "--lock", str(LOCK))
    assert cli(demo, "lock", "--lock", str(LOCK))[0] == 0
    assert [b.serial for b in load_lock(demo / LOCK).boards] == ["rk3588-0001"]
