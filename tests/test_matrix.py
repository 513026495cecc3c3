"""`baseline matrix` for real over three toolkit versions, and its bisect view."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from baseline.models.lock import MatrixCell
from baseline.models.tensors import TensorStats
from baseline.project.lockfile import load_lock
from baseline.verification.matrix import first_changes
from tests.conftest import LOCK

pytestmark = pytest.mark.toolkit  # every test here drives the real toolkit

VERSIONS = ("2.2.0", "2.3.2", "2.5.0")


def test_matrix_over_three_toolkits(demo: Path, cli) -> None:
    args = [f"--toolkit={v}" for v in VERSIONS]
    code, out, _ = cli(
        demo,
        "matrix",
        "--lock",
        str(LOCK),
        *args,
        "--model",
        "detector",
        "--model",
        "nms_head",
        "--format",
        "json",
        "--record",
    )
    assert code == 0
    document = json.loads(out)
    assert document["toolkits"] == list(VERSIONS)
    cells = {(c["toolkit"], c["model"]): c for c in document["cells"]}
    for version in VERSIONS:
        detector = cells[(version, "detector")]
        assert detector["compiled"] and detector["min_cosine"] > 0.9999
        assert detector["compiler_version"].startswith(version)
        assert not cells[(version, "nms_head")]["compiled"]
        assert "NonMaxSuppression" in cells[(version, "nms_head")]["error"]
    assert len(load_lock(demo / LOCK).matrix) == 6


def stats(mean: float) -> list[TensorStats]:
    return [
        TensorStats(
            name="y",
            dtype="float32",
            shape=[1],
            min=mean,
            max=mean,
            mean=mean,
            std=0.0,
            p01=mean,
            p50=mean,
            p99=mean,
            nan=0,
            inf=0,
        )
    ]


def cell(version: str, compiled: bool = True) -> MatrixCell:
    return MatrixCell(toolkit=version, model="m", target="rk3588", compiled=compiled, stage="done")


def test_first_change_names_the_version_that_changed_a_result(demo: Path) -> None:
    lock = load_lock(demo / LOCK)
    classifier = lock.model("classifier")
    assert classifier is not None
    lock = lock.model_copy(update={"models": [classifier.model_copy(update={"name": "m"})]})
    versions = ["2.2.0", "2.3.0", "2.3.2", "2.5.0"]
    cells = [cell(v) for v in versions]
    outputs = {
        ("2.2.0", "m", "rk3588"): stats(1.0),
        ("2.3.0", "m", "rk3588"): stats(1.0),
        ("2.3.2", "m", "rk3588"): stats(1.5),
        ("2.5.0", "m", "rk3588"): stats(1.5),
    }
    [change] = first_changes(versions, cells, outputs, lock)
    assert (change.before, change.after) == ("2.3.0", "2.3.2") and "min 1 → 1.5" in change.what
    broken = [cell("2.2.0"), cell("2.3.0", compiled=False)]
    outputs = {("2.2.0", "m", "rk3588"): stats(1.0), ("2.3.0", "m", "rk3588"): []}
    assert first_changes(versions[:2], broken, outputs, lock)[0].what.startswith("stopped compiling")
