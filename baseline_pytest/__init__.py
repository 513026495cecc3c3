"""The pytest plugin's entry point (`pytest11`): options, the `baseline` fixture, lock collection.

pytest loads every installed plugin in every project, so this module is kept apart from the
`baseline` package and imports nothing of it: a project with its own `baseline` package (or
module) must keep seeing its own, and pytest must start even when that one shadows ours.
baseline's internals (`baseline.pytest_plugin`) are imported only when a test asks for them:
`--baseline-lock` / ini `baseline_lock`, or the `baseline` fixture.

    pytest --baseline-lock lockfiles/demo/baseline.lock     # every gate of every model is a test
    def test_model(baseline): baseline.assert_passes("classifier")
"""

from __future__ import annotations

import fnmatch
import importlib
import shutil
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


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


def lock_path(config: pytest.Config) -> Path | None:
    value = config.getoption("--baseline-lock") or config.getini("baseline_lock")
    return Path(value) if value else None


def pytest_configure(config: pytest.Config) -> None:
    lock = lock_path(config)
    if config.getoption("--baseline-lock") and lock is not None and not collected_anyway(config, lock):
        config.args.append(str(lock))
    config.pluginmanager.register(Summary(config), "baseline-summary")
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(XdistController(), "baseline-xdist")


def collected_anyway(config: pytest.Config, lock: Path) -> bool:
    """Whether pytest reaches the lock through the paths it collects. Then it is not named again:
    pytest 8 given a folder and a file inside it collects the file alone (`--baseline-lock L`
    would drop the project's own tests)."""
    here = config.invocation_params.dir
    target = (here / lock).resolve()
    skipped = config.getini("norecursedirs")
    for arg in config.args:
        path = (here / arg.split("::")[0]).resolve()
        if path == target:
            return True
        if path in target.parents:
            between = target.relative_to(path).parts[:-1]
            if not any(fnmatch.fnmatch(part, pattern) for part in between for pattern in skipped):
                return True
    return False


SHARED_FOLDER = "baseline_shared"
"""The key under which a worker finds the session's scratch folder (`baseline.pytest_plugin`)."""


class XdistController:
    """On pytest-xdist's controller: every worker gets one scratch folder of this session, where
    they verify each lock once and take turns writing the cache and the lock
    (`baseline.pytest_plugin.Shared`). Removed when the session ends."""

    def __init__(self) -> None:
        self.folder: str | None = None

    def pytest_configure_node(self, node: Any) -> None:
        if self.folder is None:
            self.folder = tempfile.mkdtemp(prefix="baseline-pytest-")
        node.workerinput[SHARED_FOLDER] = self.folder

    def pytest_unconfigure(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


GATE, CHECKED, UPDATED = "baseline_gate", "baseline_checked", "baseline_updated"
"""User properties the items and the fixture set (`baseline.pytest_plugin`); reports carry them
from xdist workers to the controller, which prints the summary."""


class Summary:
    """The terminal summary, as syrupy's: how many gates passed, failed, were expected to fail
    or skipped; how many fixture checks; which models `--baseline-update` accepted."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.gates: dict[str, int] = {}
        self.checks: dict[str, int] = {}
        self.updated: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        properties = [(key, value) for key, value in report.user_properties if isinstance(key, str)]
        self.updated += [str(value) for key, value in properties if key == UPDATED]
        if report.when != "call" and not (report.when == "setup" and not report.passed):
            return
        outcome = "xfailed" if hasattr(report, "wasxfail") else report.outcome
        if any(key == GATE for key, _ in properties):
            self.gates[outcome] = self.gates.get(outcome, 0) + 1
        elif any(key == CHECKED for key, _ in properties):
            self.checks[outcome] = self.checks.get(outcome, 0) + 1

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if hasattr(self.config, "workerinput") or not (self.gates or self.checks or self.updated):
            return
        terminalreporter.section("baseline")
        for one, many, counts in (
            ("gate", "gates", self.gates),
            ("test using the baseline fixture", "tests using the baseline fixture", self.checks),
        ):
            if counts:
                total = sum(counts.values())
                parts = ", ".join(f"{counts[o]} {o}" for o in OUTCOMES if counts.get(o))
                terminalreporter.write_line(f"{total} {one if total == 1 else many}: {parts}")
        for line in sorted(set(self.updated)):
            terminalreporter.write_line(f"updated in the lock: {line}")


OUTCOMES = ("passed", "failed", "xfailed", "skipped")


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    lock = lock_path(parent.config)
    if lock is None or file_path.name != lock.name or file_path.resolve() != lock.resolve():
        return None
    collector: pytest.Collector = internals().LockFile.from_parent(parent, path=file_path)
    return collector


@pytest.fixture
def baseline(request: pytest.FixtureRequest) -> Any:
    """The configured lock, verified on demand (`--baseline-lock` or ini `baseline_lock`)."""
    lock = lock_path(request.config)
    if lock is None:
        pytest.fail("no lock configured: pass --baseline-lock PATH or set baseline_lock in the ini file")
    return internals().make_baseline(request, lock)


def internals() -> ModuleType:
    """`baseline.pytest_plugin`, or a one-line failure (no traceback) if `baseline` is another package."""
    try:
        return importlib.import_module("baseline.pytest_plugin")
    except ImportError as error:
        import baseline as found  # whatever `baseline` this project resolves to

        where = getattr(found, "__file__", None) or "a namespace package"
        pytest.fail(
            f"the baseline pytest plugin cannot load its internals ({error}): `import baseline` "
            f"finds {where}, not the baseline tool; rename that package or run pytest where it "
            "does not shadow the tool",
            pytrace=False,
        )
