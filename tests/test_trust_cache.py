"""A pull request can commit files into the cache folder (`git add -f .baseline-cache`). Cached
results are believed as written, so entries that came with the checkout must not be read:
otherwise a forged "pass" (or a parsed lock that is not the file) turns a regression green."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

from baseline.locker import lock_project
from baseline.project.layout import Project
from baseline.verification.verify import verify_project

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

LOCK = Path("zoo.lock")
FORGED = "FORGED by the pull request"


def _zoo(root: Path) -> Path:
    path = Path(__file__).resolve().parent.parent / "bench" / "zoo.py"
    spec = importlib.util.spec_from_file_location("bench_zoo", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return Path(module.make_zoo(root, 2))


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    root = _zoo(tmp_path / "zoo")
    _git(root, "init", "-q")
    located = Project.locate(root / LOCK)
    lock_project(located)
    verify_project(located)  # fills the cache
    return located


def _forge(root: Path) -> int:
    """Rewrite every cached static result's summary, as a forger would rewrite a verdict."""
    forged = 0
    cache = root / ".baseline-cache"
    for entry in [*(cache / "results").iterdir(), *(cache / "batches").iterdir()]:
        text = entry.read_text()
        if "predicted to compile" in text:
            entry.write_text(text.replace("predicted to compile", FORGED))
            forged += 1
    return forged


def test_a_local_cache_is_believed(project: Project) -> None:
    """The premise: an entry in a cache nobody committed is read as written."""
    assert _forge(project.root) > 0
    assert any(FORGED in result.summary for result in verify_project(project).results)


def test_cache_entries_committed_to_git_are_not_read(project: Project) -> None:
    assert _forge(project.root) > 0
    _git(project.root, "add", "-f", ".baseline-cache")
    report = verify_project(project)
    assert not any(FORGED in result.summary for result in report.results)
    assert report.passed
    assert any(
        "committed to git" in warning and "git rm -r --cached" in warning for warning in report.warnings
    )


def test_lock_check_does_not_read_a_committed_cache(project: Project, cli) -> None:
    _git(project.root, "add", "-f", ".baseline-cache")
    code, out, err = cli(project.root, "lock", "--lock", str(LOCK), "--check")
    assert code == 0, out + err
    assert "committed to git" in err and "up to date" in out


def test_no_cache_reads_no_committed_parse_of_the_lock(project: Project) -> None:
    """`--no-cache` reads the lock's remembered parse (kept under the sha256 of its bytes) where
    nobody committed the cache; a committed one may be a lock that is not the file."""
    from baseline.errors import ConfigError
    from baseline.verification.cache import ParsedLock, cache_root
    from baseline.verification.verify import VerifyOptions

    parsed = ParsedLock(cache_root(project.root), project.lock_path)
    digest, _, text = parsed.path.read_bytes().partition(b"\n")
    assert b'"captures": "captures"' in text, "the parse verify remembered"
    parsed.path.write_bytes(digest + b"\n" + text.replace(b'"captures": "captures"', b'"captures": "forged"'))
    with pytest.raises(ConfigError, match="captures differs from project.captures"):
        verify_project(project, options=VerifyOptions(use_cache=False))  # a local parse is read as written
    _git(project.root, "add", "-f", ".baseline-cache")
    assert verify_project(project, options=VerifyOptions(use_cache=False)).passed, "the file was read"
