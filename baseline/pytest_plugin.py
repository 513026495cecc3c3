"""The pytest plugin's collectors and items; the logic lives in `baseline.testing`.

The hooks, options and the `baseline` fixture are in `baseline_pytest`, the module pytest
loads in every project: it imports this one only when a lock or the fixture is used.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from baseline.errors import BaselineError
from baseline.models.results import GateResult, Status, place_label
from baseline.testing import Baseline, gate_failure_message

__all__ = ["Baseline", "GateItem", "LockFile"]

RESULTS = pytest.StashKey[dict[str, Any]]()
"""Each lock's results (or the error that stopped its verification), once per pytest session."""


class LockFile(pytest.File):
    """A lock: one collector per model, one test per gate job."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        from baseline.project.lockfile import load_lock
        from baseline.verification.verify import plan

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
    cache = item.config.stash.setdefault(RESULTS, {})
    path = str(item.path)
    if path not in cache:
        from baseline.project.layout import Project
        from baseline.verification.verify import verify_project

        try:
            report = verify_project(Project.locate(item.path))
            cache[path] = {(r.model, r.gate, r.backend, r.target): r for r in report.results}
        except BaselineError as error:
            cache[path] = error
    found = cache[path]
    if isinstance(found, BaselineError):
        raise found
    return found[item.key]  # type: ignore[no-any-return]
