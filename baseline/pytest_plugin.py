"""The pytest plugin's collectors and items, and what the processes of one session share.

The hooks, options, the `baseline` fixture and the terminal summary are in `baseline_pytest`,
the module pytest loads in every project: it imports this one only when a lock or the fixture
is used. The logic of the assertions lives in `baseline.testing`.

Under pytest-xdist every worker is a process of its own: without care each would verify the
whole lock for its share of the gate items, and two would write the cache and the lock at once.
The controller hands the workers one scratch folder (`baseline_pytest`), and `Shared` keeps
there what they share: a lock verified once (its report as JSON, read by the others), a model
accepted once, and an advisory file lock that lets one worker at a time verify or accept. The
same recipe as pytest-xdist's documented one for session fixtures that must run once; without
xdist the folder is None and all of it is in memory.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from baseline.errors import BaselineError
from baseline.files.fsutil import exclusive_lock, write_atomic
from baseline.files.hashing import sha256_bytes
from baseline.models.results import GateResult, Report, Status, place_label
from baseline.testing import Baseline, gate_failure_message, updated_message

__all__ = ["Baseline", "GateItem", "LockFile", "Shared", "make_baseline"]

SHARED_FOLDER = "baseline_shared"
"""The key of the scratch folder in an xdist worker's `workerinput` (set by `baseline_pytest`)."""

GATE = "baseline_gate"
"""A user property every gate item carries (the model): the terminal summary counts by it."""

UPDATED = "baseline_updated"
"""A user property of a test that accepted a model into the lock (`model (reason)`)."""

CHECKED = "baseline_checked"
"""A user property of a test that asserted a model through the `baseline` fixture."""

SHARED = pytest.StashKey["Shared"]()


class Shared:
    """What one pytest session's processes share: each lock verified once, each model accepted
    once, and one verification or acceptance at a time (they write the same cache and lock)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self._reports: dict[str, Report | BaselineError] = {}
        self._results: dict[str, dict[tuple[str, str, str | None, str | None], GateResult]] = {}
        self._accepted: set[str] = set()
        self._depth = 0

    @classmethod
    def of(cls, config: pytest.Config) -> Shared:
        if SHARED not in config.stash:
            folder = getattr(config, "workerinput", {}).get(SHARED_FOLDER)
            config.stash[SHARED] = cls(Path(folder) if folder else None)
        return config.stash[SHARED]

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        """This process alone verifies or accepts while the block runs. Reentrant: two `flock`s
        of one file from one process, through two opens, would wait for each other forever."""
        if self.folder is None or self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        with exclusive_lock(self.folder / "turn.lock"):
            self._depth = 1
            try:
                yield
            finally:
                self._depth = 0

    def report(self, lock_path: Path) -> Report:
        """The whole lock verified, once per session: by this process, or read from the one
        that did. An error that stopped the verification is raised again in every process."""
        key = str(lock_path.resolve())
        if key not in self._reports:
            with self.turn():
                stored = self._stored(key)
                self._reports[key] = self._verify(key, lock_path) if stored is None else stored
        found = self._reports[key]
        if isinstance(found, BaselineError):
            raise found
        return found

    def result(self, lock_path: Path, key: tuple[str, str, str | None, str | None]) -> GateResult | None:
        """One gate item's result in its lock's report (indexed once: a lock of 1,000 models
        has ~5,000 items)."""
        index = self._results.get(str(lock_path))
        if index is None:
            results = self.report(lock_path).results
            index = self._results[str(lock_path)] = {
                (r.model, r.gate, r.backend, r.target): r for r in results
            }
        return index.get(key)

    def _file(self, key: str, kind: str) -> Path | None:
        return None if self.folder is None else self.folder / f"{kind}-{sha256_bytes(key.encode())[:16]}.json"

    def _stored(self, key: str) -> Report | BaselineError | None:
        file = self._file(key, "report")
        if file is None or not file.is_file():
            return None
        stored = json.loads(file.read_text())
        if "error" in stored:
            return BaselineError(stored["error"])
        return Report.model_validate(stored["report"])

    def _verify(self, key: str, lock_path: Path) -> Report | BaselineError:
        from baseline.project.layout import Project
        from baseline.verification.verify import verify_project

        found: Report | BaselineError
        try:
            found = verify_project(Project.locate(lock_path))
            stored: dict[str, Any] = {"report": found.model_dump(mode="json")}
        except BaselineError as error:
            found, stored = error, {"error": str(error)}
        file = self._file(key, "report")
        if file is not None:
            write_atomic(file, json.dumps(stored).encode(), durable=False)
        return found

    def accept_once(self, lock_path: Path, model: str, reason: str) -> bool:
        """Accept `model`'s change into the lock unless a process of this session already did;
        whether this call did."""
        from baseline.project.accept import accept_change
        from baseline.project.layout import Project

        key = f"{lock_path.resolve()}\0{model}"
        with self.turn():
            marker = self._file(key, "accepted")
            if key in self._accepted or (marker is not None and marker.exists()):
                return False
            accept_change(Project.locate(lock_path), model, reason)
            self._accepted.add(key)
            if marker is not None:
                write_atomic(marker, b"{}", durable=False)
        return True


def make_baseline(request: pytest.FixtureRequest, lock: Path) -> Baseline:
    """The `baseline` fixture's object: its verifications take turns with the other workers',
    and what it checked or updated is noted on the test for the terminal summary."""
    config = request.config
    node = request.node
    return Baseline(
        lock,
        update=config.getoption("--baseline-update"),
        reason=config.getoption("--baseline-reason"),
        turn=Shared.of(config).turn,
        note=lambda kind, model: node.user_properties.append(
            (UPDATED if kind == "updated" else CHECKED, model)
        ),
    )


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
        self.user_properties.append((GATE, key[0]))

    def runtest(self) -> None:
        result = _result_for(self)
        if result.status is Status.SKIP:
            pytest.skip(result.summary)
        if result.status is Status.XFAIL:
            pytest.xfail(result.summary)
        if not result:
            raise GateFailure(self._failure(result))

    def _failure(self, result: GateResult) -> str:
        """The gate's numbers and hint; with `--baseline-update`, the model accepted instead
        (once, by the first of its failing gates in the whole session)."""
        config = self.config
        if not config.getoption("--baseline-update"):
            return gate_failure_message([result])
        reason = config.getoption("--baseline-reason") or "updated with pytest --baseline-update"
        model = self.key[0]
        if Shared.of(config).accept_once(self.path, model, reason):
            self.user_properties.append((UPDATED, f"{model} ({reason})"))
        return updated_message(model, reason)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, (GateFailure, BaselineError)):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.key[0]}::{self.name}"


class GateFailure(AssertionError):
    """A gate failed; its message is the gate's numbers and hint."""


def _result_for(item: GateItem) -> GateResult:
    """The item's result in its lock's report, verified once per session (shared workers and runs)."""
    result = Shared.of(item.config).result(item.path, item.key)
    if result is None:
        raise BaselineError(f"{item.path}: no result for {item.key[0]} {item.name}; collect the lock again")
    return result
