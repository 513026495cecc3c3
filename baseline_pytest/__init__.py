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

import importlib
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
    if config.getoption("--baseline-lock") and lock is not None and str(lock) not in config.args:
        config.args.append(str(lock))


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
    return internals().Baseline(
        lock,
        update=request.config.getoption("--baseline-update"),
        reason=request.config.getoption("--baseline-reason"),
    )


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
