"""Shared test fixtures: a copy of the demo project, locked once per session."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from baseline.cli import app
from baseline.locker import lock_project
from baseline.project.layout import Project

# toolkit_guard fails a test that reaches the real toolkit without @pytest.mark.toolkit
pytest_plugins = ["pytester", "tests.toolkit_guard"]

REPO = Path(__file__).resolve().parents[1]
DEMO_INTENT = REPO / "lockfiles" / "demo" / "baseline.toml"
LOCK = Path("lockfiles/demo/baseline.lock")


def copy_demo_sources(destination: Path) -> Path:
    """A fresh project with the demo's models, exporter script and intent (no lock yet)."""
    (destination / "pyproject.toml").write_text("[project]\nname = 'sample'\n")
    shutil.copytree(
        REPO / "fixtures" / "demo",
        destination / "fixtures" / "demo",
        ignore=shutil.ignore_patterns("tensors"),
    )
    shutil.copy2(REPO / "fixtures" / "make_models.py", destination / "fixtures" / "make_models.py")
    (destination / "lockfiles" / "demo").mkdir(parents=True)
    shutil.copy2(DEMO_INTENT, destination / "lockfiles" / "demo" / "baseline.toml")
    return destination


@pytest.fixture(scope="session")
def locked_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_demo_sources(tmp_path_factory.mktemp("template"))
    lock_project(Project.locate(root / LOCK))
    return root


@pytest.fixture
def demo(locked_template: Path, tmp_path: Path) -> Path:
    """A locked copy of the demo project that the test may modify."""
    root = tmp_path / "project"
    shutil.copytree(locked_template, root)
    return root


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Callable[..., tuple[int, str, str]]:
    """Run the CLI in a project: `cli(root, "verify", ...)` → (exit code, stdout, stderr)."""

    def invoke(root: Path, *args: str) -> tuple[int, str, str]:
        monkeypatch.chdir(root)
        result = CliRunner().invoke(app, list(args), catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr

    return invoke


def retrain(root: Path, model: str = "classifier", perturb: float = 0.02) -> None:
    """Rewrite a demo model with slightly different weights, as a retraining would."""
    command = [
        sys.executable,
        "fixtures/make_models.py",
        "--out",
        "fixtures/demo",
        "--perturb",
        str(perturb),
        model,
    ]
    subprocess.run(command, cwd=root, check=True, capture_output=True)


def tensor_file(root: Path, model: str, stem: str, suffix: str = ".npz") -> Path:
    """A demo model's tensor or artifact file; names carry a content hash (`inputs.<sha12>.npz`)."""
    folder = root / "fixtures" / "demo" / "tensors" / model
    [found] = folder.glob(f"{stem}.[0-9a-f]*{suffix}")
    return found


def one_line_error(err: str) -> str:
    """The error line, after which nothing follows; only `lock`'s progress lines come before it."""
    *progress, error = err.strip().splitlines()
    assert error.startswith("error: ") and "Traceback" not in err, err
    assert all(line.startswith("… ") for line in progress), err
    return error
