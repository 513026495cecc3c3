"""Reports to render: a hand-made one (no toolkit), the demo verified, and the demo with a retrained model."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from baseline.models.lock import Lock
from baseline.models.results import GateResult, Report, Status
from baseline.project.layout import Project
from baseline.project.lockfile import load_lock
from baseline.verification.verify import verify_project
from tests.conftest import LOCK, REPO

VOID_ELEMENTS = {"meta", "br", "hr", "img", "input", "link"}
SVG_ELEMENT = re.compile(r"<svg\b.*?</svg>", re.DOTALL)


@pytest.fixture(scope="session")
def demo_lock() -> Lock:
    """The repository's demo lock, read without running anything."""
    return load_lock(REPO / LOCK)


@pytest.fixture(scope="session")
def verified(locked_template: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Report, Lock]:
    """A real `baseline verify` of the demo (every gate passes or is expected to fail)."""
    root = tmp_path_factory.mktemp("verified") / "project"
    shutil.copytree(locked_template, root)
    project = Project.locate(root / LOCK)
    return verify_project(project), load_lock(project.lock_path)


@pytest.fixture(scope="session")
def retrained(locked_template: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Report, Lock]:
    """The demo after the classifier's weights moved by 2 %: integrity, artifact and drift fail."""
    root = tmp_path_factory.mktemp("retrained") / "project"
    shutil.copytree(locked_template, root)
    command = [sys.executable, "fixtures/make_models.py", "--out", "fixtures/demo", "--perturb", "0.02"]
    subprocess.run([*command, "classifier"], cwd=root, check=True, capture_output=True)
    project = Project.locate(root / LOCK)
    return verify_project(project, only=["classifier"]), load_lock(project.lock_path)


@pytest.fixture
def handmade(demo_lock: Lock) -> Report:
    """One result of each status, with the awkward text real logs contain."""
    reference = demo_lock.model("classifier").reference("rknn-sim", "rk3588")  # type: ignore[union-attr]
    assert reference is not None
    shifted = {
        stats.name: {
            "worst_ratio": 42.0,
            "candidate": {**stats.model_dump(), "quantiles": [q + 0.05 for q in stats.quantiles]},
        }
        for stats in reference.outputs
    }
    distances = {"entire_euclidean": 0.0, "single_euclidean": 0.0}
    layers = [
        {"op": "Input", "name": "image", "entire_cosine": 1.0, "single_cosine": 1.0, **distances},
        {"op": "Conv", "name": "conv<1>", "entire_cosine": math.nan, "single_cosine": math.nan, **distances},
        {"op": "Relu", "name": "relu", "entire_cosine": math.nan, "single_cosine": math.inf, **distances},
    ]
    agreement = {
        "max_abs": None, "mean_abs": None, "max_rel": None, "mean_rel": None, "mismatches": 0,
        "total": 10, "candidate_nan": 10, "candidate_inf": 0, "min_cosine": 0.99,
    }  # fmt: skip
    return Report(
        lock="lockfiles/demo/baseline.lock",
        results=[
            GateResult(
                model="classifier", gate="integrity", status=Status.PASS, summary="8 files match the lock"
            ),
            GateResult(
                model="classifier",
                gate="drift",
                backend="rknn-sim",
                target="rk3588",
                status=Status.FAIL,
                summary="2 statistics drifted; first: output 'logits' min: |Δ| 0.0288 > allowed 0.000327",
                metrics={"outputs": shifted},
                details=[
                    "output 'logits' min: baseline -0.317 → -0.288 (|Δ| 0.0288)",
                    "\x1b[31mred\x1b[0m <b>",
                ],
                hint="if the change is intended, run `baseline lock`",
            ),
            GateResult(
                model="classifier",
                gate="compilable",
                backend="rknn-sim",
                target="rk3588-w8a8",
                status=Status.ERROR,
                summary='could not run: worker crashed <script>alert("x")</script> & more',
            ),
            GateResult(
                model="classifier",
                gate="consistency",
                backend="rknn-sim",
                target="rk3588",
                status=Status.SKIP,
                summary="not built; see compilable",
            ),
            GateResult(
                model="classifier",
                gate="consistency",
                backend="rknn-sim",
                target="rk3588-w8a8",
                status=Status.XFAIL,
                summary="expected failure (fp16 overflow): 512 NaN",
                metrics={
                    "outputs": {
                        "logits": {**agreement, "cosine": None},
                        "probs": {**agreement, "cosine": 0.5},
                    },
                    "layers": layers,
                },
                details=["first divergent layer [Conv] conv<1>"],
            ),
        ],
    )


class TagBalance(HTMLParser):
    """Fails on a closing tag that does not close the innermost open element."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in VOID_ELEMENTS:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        pass  # <line/>, <polyline/> in inline SVG

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()


def assert_well_formed(document: str) -> None:
    """The page parses, every element is closed in order, and nothing is fetched from elsewhere."""
    parser = TagBalance()
    parser.feed(document)
    parser.close()
    assert parser.stack == []
    assert document.startswith("<!DOCTYPE html>")
    assert "http" not in document
    assert "<script" not in document and "src=" not in document and "url(" not in document


def chromium_or_skip() -> str:
    """A headless Chromium to open the pages in; the suite never requires one."""
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found is None:
        pytest.skip("chromium is not installed (.ci/run installs it with apt)")
    return found


def chromium_flags(profile: Path) -> list[str]:
    return [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        f"--user-data-dir={profile}",
    ]


def open_in_chromium(page: Path, shot: Path, height: int = 3000) -> str:
    """The DOM the browser parsed from `page`, with a screenshot `shot` 1200 pixels wide."""
    chromium = chromium_or_skip()
    flags = chromium_flags(shot.parent / "profile")
    dom = subprocess.run(
        [chromium, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    ).stdout
    subprocess.run(
        [chromium, *flags, f"--screenshot={shot}", f"--window-size=1200,{height}", page.as_uri()],
        capture_output=True,
        timeout=120,
    )
    return dom
