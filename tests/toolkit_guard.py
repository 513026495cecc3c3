"""Enforces the `toolkit` mark: a test that reaches the real RKNN-Toolkit2 without it fails.

`pytest -m "not toolkit"` is the fast loop, and it only stays fast (and honest on machines
without the toolkit) if every test that needs the toolkit says so. A convention would rot,
so the chokepoints where baseline reaches the toolkit are wrapped for the whole session:

- `ToolkitWorker.start`: the toolkit's Python starting a worker subprocess (every conversion,
  simulation and analysis goes through it);
- `provision.ensure_toolchain` on the real cache and `provision._build`: provisioning (unless
  the test replaced `subprocess.run`: then the build runs no installer and reaches nothing).

An unmarked test reaching one fails with a message naming the mark. A fixture that reached the
toolkit while being set up (say the session's locked demo) is remembered, and an unmarked test
that requests it fails too, whatever order the tests run in. Subprocesses (`python -m baseline`)
are outside this process; the tests that start them use such fixtures.

A thread that was already running when a test started belongs to an earlier test: what it
reaches counts against neither this test nor its fixtures, and is listed at the end of the run
(a job thread outliving its test is worth knowing about, but is not this test's doing).
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable, Generator
from typing import Any

import pytest

from baseline.toolchain import provision
from baseline.toolchain.client import ToolkitWorker

MARK = "toolkit"


class ToolkitGuard:
    def __init__(self) -> None:
        self.test: pytest.Item | None = None
        self.fixtures_in_setup: list[str] = []
        self.toolkit_fixtures: set[str] = set()
        self.earlier_threads: set[threading.Thread] = set()
        self.strays: list[str] = []

    def test_starts(self, item: pytest.Item) -> None:
        self.test = item
        self.earlier_threads = set(threading.enumerate()) - {threading.main_thread()}

    def reached(self, chokepoint: str) -> None:
        """Called at every chokepoint: remember the fixtures being set up, refuse unmarked tests."""
        thread = threading.current_thread()
        if thread in self.earlier_threads:
            during = self.test.nodeid if self.test is not None else "between tests"
            self.strays.append(f"thread {thread.name!r} ({chokepoint}) during {during}")
            return
        self.toolkit_fixtures.update(self.fixtures_in_setup)
        if self.test is None or _marked(self.test):
            return
        message = (
            f"{self.test.nodeid} reaches the real RKNN-Toolkit2 ({chokepoint}) but is not marked: "
            f"add @pytest.mark.{MARK} (or `pytestmark = pytest.mark.{MARK}` in the module) so that "
            f'`pytest -m "not {MARK}"` stays a fast loop'
        )
        # Failed is a BaseException: library code catching Exception (gates, backends) cannot hide it
        pytest.fail(message, pytrace=False)

    def check_fixtures(self, item: pytest.Item) -> None:
        used = sorted(self.toolkit_fixtures.intersection(getattr(item, "fixturenames", ())))
        if used and not _marked(item):
            pytest.fail(
                f"{item.nodeid} uses fixture {used[0]!r}, which reached the real RKNN-Toolkit2, "
                f"but is not marked: add @pytest.mark.{MARK}",
                pytrace=False,
            )


def _marked(item: pytest.Item) -> bool:
    return item.get_closest_marker(MARK) is not None


guard = ToolkitGuard()
_patches = pytest.MonkeyPatch()


def _guarded(
    function: Callable[..., Any], chokepoint: str, applies: Callable[[], bool]
) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if applies():
            guard.reached(chokepoint)
        return function(*args, **kwargs)

    return wrapper


def _real_cache() -> bool:
    """Tests of provisioning point BASELINE_TOOLCHAINS at a temporary folder of fakes."""
    return not os.environ.get(provision.CACHE_ENV)


_REAL_RUN = subprocess.run


def _real_subprocesses() -> bool:
    """Tests of the install commands replace `subprocess.run` with a fake that records them."""
    return subprocess.run is _REAL_RUN


def pytest_configure(config: pytest.Config) -> None:
    always = lambda: True  # noqa: E731
    _patches.setattr(ToolkitWorker, "start", _guarded(ToolkitWorker.start, "starting the worker", always))
    _patches.setattr(
        provision, "_build", _guarded(provision._build, "building a toolchain", _real_subprocesses)
    )
    _patches.setattr(
        provision,
        "ensure_toolchain",
        _guarded(provision.ensure_toolchain, "provisioning a toolchain", _real_cache),
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    _patches.undo()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    guard.test_starts(item)
    guard.check_fixtures(item)
    yield
    guard.check_fixtures(item)  # fixtures first set up for this very test


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    try:
        yield
    finally:
        guard.test = None


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if guard.strays:
        terminalreporter.section("toolkit reached by threads that outlived their test")
        for stray in guard.strays:
            terminalreporter.line(stray)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any]) -> Generator[None, Any, Any]:
    if _pytest_own(fixturedef):
        return (yield)
    guard.fixtures_in_setup.append(fixturedef.argname)
    try:
        return (yield)
    finally:
        guard.fixtures_in_setup.pop()


def _pytest_own(fixturedef: pytest.FixtureDef[Any]) -> bool:
    """pytest's own fixtures (`tmp_path`, `monkeypatch`, ...) never reach the toolkit. A thread
    started during a setup counts for the fixtures being set up at that moment (a fixture's
    jobs run on job threads); pytest's own are never among them. (Seen once, in a CI run on a
    loaded machine: a job thread outliving its test marked `tmp_path` as a toolkit fixture and
    every later unmarked test using it failed; such a thread is now set aside as an earlier
    test's, `ToolkitGuard.reached`, and listed at the end of the run.)"""
    return getattr(fixturedef.func, "__module__", "").startswith("_pytest.")
