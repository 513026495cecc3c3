"""`scripts/measure_op_support.py`, split into `scripts/op_support/`, still writes the shipped op
table byte for byte (no toolkit needed; a full `--annotate-inputs` round trip, ~15-50 s, was
checked by hand when splitting)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import baseline

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "measure_op_support.py"
TABLE = Path(baseline.__file__).parent / "data" / "op_support" / "rknn-toolkit2-2.5.0.json"


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    if not SCRIPT.is_file():
        pytest.skip("scripts/ is not part of an installed wheel")
    env = {**os.environ, "PYTHONPATH": str(Path(baseline.__file__).parent.parent)}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300, env=env
    )


def test_the_table_writer_reproduces_the_shipped_table(tmp_path: Path) -> None:
    if not SCRIPT.is_file():
        pytest.skip("scripts/ is not part of an installed wheel")
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from op_support.table import write_json
    finally:
        sys.path.remove(str(SCRIPT.parent))
    copy = tmp_path / "table.json"
    write_json(copy, json.loads(TABLE.read_text(encoding="utf-8")))
    assert copy.read_bytes() == TABLE.read_bytes()


def test_the_script_still_starts() -> None:
    run = run_script("--help")
    assert run.returncode == 0 and "--annotate-inputs" in run.stdout, run.stderr[-2000:]


def test_every_op_support_module_is_small() -> None:
    modules = sorted((ROOT / "scripts" / "op_support").glob("*.py"))
    if not modules:
        pytest.skip("scripts/ is not part of an installed wheel")
    assert {m.name: len(m.read_text().splitlines()) < 500 for m in [*modules, SCRIPT]} == {
        m.name: True for m in [*modules, SCRIPT]
    }
