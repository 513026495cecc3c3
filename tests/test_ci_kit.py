"""The documented GitHub workflow (docs/github-workflow.yml): its shape, and its steps run here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LOCK, REPO

yaml = pytest.importorskip("yaml")  # PyYAML comes with ray (the test extra)

WORKFLOW = REPO / "docs" / "github-workflow.yml"
EXPRESSION = re.compile(r"\$\{\{\s*([^}]+?)\s*\}\}")
GITHUB = {
    "github.server_url": "https://github.example",
    "github.repository": "team/models",
    "github.run_id": "42",
}


def workflow() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text())
    return document


def steps() -> list[dict[str, Any]]:
    jobs = workflow()["jobs"]
    return list(jobs["baseline"]["steps"])


def test_the_workflow_caches_toolkits_and_results_and_keeps_one_comment() -> None:
    restored = {s["with"]["path"] for s in steps() if s.get("uses", "").startswith("actions/cache/restore@")}
    assert restored == {"~/.cache/baseline/toolchains", ".baseline-cache"}
    # a pull request's code runs in verify: it never saves a cache that a later run would believe
    assert not [s for s in steps() if s.get("uses", "").startswith("actions/cache@")]
    saves = [s for s in steps() if s.get("uses", "").startswith("actions/cache/save@")]
    assert {s["with"]["path"] for s in saves} == restored
    assert all(s["if"] == "github.event_name == 'push' && always()" for s in saves)
    triggers: dict[Any, Any] = workflow()
    assert triggers[True]["push"]["branches"] == ["main"]  # PyYAML reads the key `on` as True
    checkout = next(step for step in steps() if step.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0, "a shallow clone changes the exporter's recorded commit"
    comment = next(step for step in steps() if step.get("uses", "").startswith("actions/github-script@"))
    assert (
        "<!-- baseline-report -->" in comment["with"]["script"]
        and "updateComment" in comment["with"]["script"]
    )
    install = next(step for step in steps() if step.get("name") == "Install baseline")
    # until it is published: the wheel built from baseline's repository (tests/test_packaging.py
    # builds it and checks the name); the comment gives the line to switch to, with the tool's own
    # name, not PyPI's unrelated `baseline`
    assert "./tools/rknn_baseline-$BASELINE_VERSION-py3-none-any.whl" in install["run"]
    assert '#   run: python -m pip install "rknn-baseline==$BASELINE_VERSION" uv' in WORKFLOW.read_text()
    assert all(re.search(r"@v\d+$", step["uses"]) for step in steps() if "uses" in step)


def expand(text: str, outputs: dict[str, str]) -> str:
    values = {**GITHUB, **{f"steps.verify.outputs.{k}": v for k, v in outputs.items()}}
    return EXPRESSION.sub(lambda match: values[match.group(1)], text)


def read_outputs(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return dict(pairs)


@pytest.mark.toolkit
def test_the_workflow_steps_run_on_the_demo(demo: Path, tmp_path: Path) -> None:
    """Every `run:` step in order, as GitHub's bash would run it (the install step excepted: the
    tool under test is already installed here)."""
    github_output = tmp_path / "github-output"
    github_output.touch()
    env = {
        **os.environ,
        **{key: str(value) for key, value in workflow()["env"].items()},
        "BASELINE_LOCK": str(LOCK),
        "GITHUB_OUTPUT": str(github_output),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    for step in steps():
        if "run" not in step or step["name"] == "Install baseline":
            continue
        outputs = read_outputs(github_output)
        step_env = {key: expand(str(value), outputs) for key, value in step.get("env", {}).items()}
        script = expand(step["run"], outputs)
        result = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
            cwd=demo,
            env={**env, **step_env},
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, f"step {step['name']!r}: {result.stderr[-2000:]}"
    assert read_outputs(github_output) == {"status": "0"}
    comment = (demo / "baseline-comment.md").read_text()
    assert comment.startswith("<!-- baseline-report -->\n### baseline verify: **PASSED**")
    assert "[full report](https://github.example/team/models/actions/runs/42)" in comment
    assert len(comment) < 65_536
    assert (demo / "baseline-report.html").read_text().startswith("<!DOCTYPE html>")
    assert "<testsuite " in (demo / "baseline-junit.xml").read_text()
