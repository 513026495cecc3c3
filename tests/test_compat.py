"""Compatibility rules and the compat gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from baseline.compat import (
    BoardVersions,
    check_opset,
    check_platform,
    check_runtime,
    rules,
    same_build_family,
)
from tests.conftest import LOCK, tensor_file


def test_every_rule_cites_a_source() -> None:
    for section, entries in rules().items():
        if isinstance(entries, list):
            assert all(entry.get("source") for entry in entries), section


def test_runtime_table() -> None:
    old = check_runtime("2.5.0", BoardVersions("declared", runtime="1.5.2", platform="rk3588"))
    assert old[0].severity == "fail" and old[0].rule == "runtime-loads-2.x"
    assert "needs librknnrt >=2.0.0; the declared runtime is 1.5.2" in old[0].message
    assert "S3 §10.1" in old[0].source
    assert check_runtime("1.5.0", BoardVersions("declared", runtime="1.5.2"))[0].rule == "runtime-loads-1.5.0"
    assert check_runtime("1.6.0", BoardVersions("declared", runtime="2.3.0")) == []
    mini = check_runtime("2.5.0", BoardVersions("observed", runtime="1.6.0", platform="rv1106"))
    assert "librknnmrt" in mini[0].message


def test_advice_is_not_failure() -> None:
    findings = check_runtime("2.5.0", BoardVersions("declared", runtime="2.3.0", driver="0.9.1"))
    assert {f.rule for f in findings} == {"same-version", "driver-0.9.2"}
    assert all(f.severity == "advice" for f in findings)


def test_shared_platforms() -> None:
    assert same_build_family("rk3566", "rk3568") and same_build_family("RV1103", "rv1106")
    assert not same_build_family("rk3588", "rk3566")
    assert check_platform("rk3588s", ["rk3588"]) == []
    assert check_platform("rk3576", ["rk3588"])[0].rule == "platform-mismatch"


def test_opset_limit() -> None:
    assert check_opset("2.5.0", 19) == [] and check_opset("2.5.0", 20)[0].rule == "opset-max-19"


@pytest.mark.toolkit
def test_lock_declaring_an_old_runtime_fails_compat_citing_rule_and_source(demo: Path, cli) -> None:
    intent = demo / "lockfiles/demo/baseline.toml"
    intent.write_text(intent.read_text().replace('runtime = "2.5.0", driver', 'runtime = "1.5.2", driver'))
    assert cli(demo, "lock", "--lock", str(LOCK))[0] == 0
    code, out, _ = cli(demo, "verify", "--lock", str(LOCK), "--model", "detector", "--format", "json")
    compat = next(r for r in json.loads(out)["results"] if r["gate"] == "compat")
    assert code == 1 and compat["status"] == "fail"
    assert "toolkit 2.5.0 needs librknnrt >=2.0.0; the declared runtime is 1.5.2" in compat["summary"]
    assert "rule runtime-loads-2.x" in compat["summary"] and "S3 §10.1 Table 10-1" in compat["summary"]


@pytest.mark.toolkit
def test_offline_check_of_a_shipped_rknn(demo: Path, cli) -> None:
    artifact = tensor_file(demo, "detector", "rk3588", ".rknn").relative_to(demo).as_posix()
    code, out, _ = cli(demo, "compat", artifact, "--platform", "rk3588", "--runtime", "2.5.0")
    assert code == 0 and "COMPATIBLE" in out
    code, out, _ = cli(demo, "compat", artifact, "--platform", "rk3566", "--runtime", "1.5.2")
    assert code == 1 and "platform-mismatch" in out and "runtime-loads-2.x" in out
