"""The pytest plugin: hooks and fixtures only; the logic lives in `baseline.testing`.

pytest --baseline-lock lockfiles/demo/baseline.lock     # every gate of every model is a test
def test_model(baseline): baseline.assert_passes("classifier")
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from baseline.errors import BaselineError
from baseline.models.results import GateResult, Status, place_label
from baseline.testing import Baseline, gate_failure_message

RESULTS = pytest.StashKey[dict[str, Any]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("baseline")
    group.addoption(
        "--baseline-lock",
        help="Collect every gate of this lock as a test; also the `baseline` fixture's lock.",
    )
    group.addoption(
        "--baseline-update",
        action="store_true",
        help="Accept failing models' new outputs into the lock (with an audit entry).",
    )
    group.addoption("--baseline-reason", help="Why the update is intended (recorded in the audit trail).")
    parser.addini("baseline_lock", "Default lock for the `baseline` fixture.")


def _lock_path(config: pytest.Config) -> Path | None:
    value = config.getoption("--baseline-lock") or config.getini("baseline_lock")
    return Path(value) if value else None


def pytest_configure(config: pytest.Config) -> None:
    config.stash[RESULTS] = {}
    lock = _lock_path(config)
    if config.getoption("--baseline-lock") and lock is not None and str(lock) not in config.args:
        config.args.append(str(lock))


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    lock = _lock_path(parent.config)
    if lock is not None and file_path.resolve() == lock.resolve():
        return LockFile.from_parent(parent, path=file_path)
    return None


@pytest.fixture
def baseline(request: pytest.FixtureRequest) -> Baseline:
    """The configured lock, verified on demand (`--baseline-lock` or ini `baseline_lock`)."""
    lock = _lock_path(request.config)
    if lock is None:
        pytest.fail("no lock configured: pass --baseline-lock PATH or set baseline_lock in the ini file")
    return Baseline(
        lock,
        update=request.config.getoption("--baseline-update"),
        reason=request.config.getoption("--baseline-reason"),
    )


class LockFile(pytest.File):
    """A lock: one collector per model, one test per gate job."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        from baseline.lockfile import load_lock
        from baseline.verify import plan

        lock = load_lock(self.path)
        for model in lock.models:
            jobs = [(check.gate, check.backend, check.target) for _, check in plan([model])]
            yield ModelCollector.from_parent(self, name=model.name, jobs=jobs)


class ModelCollector(pytest.Collector):
    def __init__(self, *, jobs: list[tuple[str, str | None, str | None]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.jobs = jobs

    def collect(self) -> Iterator[pytest.Item]:
        for gate, backend, target in self.jobs:
            where = place_label(backend, target)
            yield GateItem.from_parent(
                self, name=f"{gate}[{where}]" if where else gate, key=(self.name, gate, backend, target)
            )


class GateItem(pytest.Item):
    def __init__(self, *, key: tuple[str, str, str | None, str | None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.key = key

    def runtest(self) -> None:
        result = _result_for(self)
        if result.status is Status.SKIP:
            pytest.skip(result.summary)
        if result.status is Status.XFAIL:
            pytest.xfail(result.summary)
        if not result:
            raise GateFailure(gate_failure_message([result]))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, (GateFailure, BaselineError)):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.key[0]}::{self.name}"


class GateFailure(AssertionError):
    """A gate failed; its message is the gate's numbers and hint."""


def _result_for(item: GateItem) -> GateResult:
    """Verify the whole lock once per session (shared workers and runs), then look results up."""
    cache = item.config.stash[RESULTS]
    path = str(item.path)
    if path not in cache:
        from baseline.project import Project
        from baseline.verify import verify_project

        try:
            report = verify_project(Project.locate(item.path))
            cache[path] = {(r.model, r.gate, r.backend, r.target): r for r in report.results}
        except BaselineError as error:
            cache[path] = error
    found = cache[path]
    if isinstance(found, BaselineError):
        raise found
    return found[item.key]  # type: ignore[no-any-return]
