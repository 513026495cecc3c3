"""The `toolkit` mark is enforced: an unmarked test that reaches the toolkit fails, saying why."""

from __future__ import annotations

import pytest

from tests.conftest import REPO

INNER_TESTS = """
import pytest

from baseline.errors import EnvironmentBroken
from baseline.toolchain.client import ToolkitWorker
from baseline.toolchain.provision import Toolchain


def reach_toolkit(folder):
    with pytest.raises(EnvironmentBroken):  # no toolkit in this folder: reaching it is what counts
        ToolkitWorker(Toolchain("2.5.0", folder, {}, "3.11")).start()


@pytest.fixture(scope="session")
def converted(tmp_path_factory):
    reach_toolkit(tmp_path_factory.mktemp("toolkit"))


@pytest.mark.toolkit
def test_marked_reaches_it(converted):
    pass


def test_unmarked_uses_a_fixture_that_reached_it(converted):
    pass


def test_unmarked_reaches_it(tmp_path):
    reach_toolkit(tmp_path)


def test_unmarked_without_the_toolkit():
    pass
"""


def run_guarded(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tests: str) -> pytest.RunResult:
    """`tests` as `test_inner.py`, run in order in a pytest of their own with the guard, on the
    real toolkit cache."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.delenv("BASELINE_TOOLCHAINS", raising=False)
    pytester.makepyfile(test_inner=tests)
    return pytester.runpytest_subprocess(
        "-p", "tests.toolkit_guard", "-p", "no:cacheprovider", "-p", "no:randomly"
    )


def test_unmarked_tests_that_reach_the_toolkit_fail_naming_the_mark(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run_guarded(pytester, monkeypatch, INNER_TESTS)
    result.assert_outcomes(passed=2, failed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_unmarked_uses_a_fixture_that_reached_it uses fixture 'converted', which reached the "
            "real RKNN-Toolkit2, but is not marked: add @pytest.mark.toolkit*",
            "*test_unmarked_reaches_it reaches the real RKNN-Toolkit2 (starting the worker) but is not "
            "marked: add @pytest.mark.toolkit*",
        ],
        consecutive=False,
    )


BACKGROUND_CONFTEST = """
import threading

import pytest

from test_inner import reach_toolkit

reach_during = set()


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_fixture_setup(fixturedef, request):
    if fixturedef.argname in reach_during:  # another thread reaches the toolkit meanwhile
        folder = request.config.rootpath
        thread = threading.Thread(target=lambda: pytest.raises(Exception, reach_toolkit, folder))
        thread.start()
        thread.join()
    return (yield)
"""

BACKGROUND_TESTS = (
    INNER_TESTS
    + """

@pytest.mark.toolkit
def test_marked_leaves_a_thread_that_reaches_it_during_the_next_setup():
    import conftest

    conftest.reach_during.update({"tmp_path", "project_fixture"})


@pytest.fixture
def project_fixture():
    return 1


@pytest.mark.toolkit
def test_marked_sets_up_both(tmp_path, project_fixture):
    pass


def test_unmarked_with_tmp_path_only(tmp_path):
    pass


def test_unmarked_with_the_project_fixture(project_fixture):
    pass
"""
)


def test_pytest_s_own_fixtures_are_never_blamed_for_another_thread_s_toolkit_work(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chokepoint counts for the fixtures being set up when it is reached, from any thread (a
    fixture's own jobs run on job threads); pytest's own (`tmp_path`) cannot reach the toolkit,
    so a thread reaching it meanwhile never makes them toolkit fixtures. A project's fixture
    set up at that moment is still blamed: the guard errs on the side of the mark."""
    pytester.makeconftest(BACKGROUND_CONFTEST)
    result = run_guarded(pytester, monkeypatch, BACKGROUND_TESTS)
    result.stdout.fnmatch_lines(["*test_unmarked_with_the_project_fixture uses fixture 'project_fixture'*"])
    blamed = [line for line in result.stdout.lines if "test_unmarked_with_tmp_path_only" in line]
    assert not any("ERROR" in line for line in blamed)
    result.assert_outcomes(passed=5, failed=1, errors=2)


LEFTOVER_TESTS = (
    INNER_TESTS
    + """
import threading

setting_up = threading.Event()


@pytest.mark.toolkit
def test_marked_leaves_a_thread_behind(tmp_path):
    def later():  # a job thread still running after its test: it reaches the toolkit later
        setting_up.wait(60)
        pytest.raises(Exception, reach_toolkit, tmp_path)

    threading.Thread(target=later, name="baseline-job_0").start()


@pytest.fixture
def project_fixture():
    setting_up.set()
    for thread in threading.enumerate():
        if thread.name == "baseline-job_0":
            thread.join(60)
    return 1


def test_unmarked_with_the_project_fixture(project_fixture):
    pass
"""
)


def test_a_thread_left_by_an_earlier_test_is_reported_not_blamed_on_the_test_it_runs_into(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CI flake of an earlier session: some test's job thread reached the toolkit while a later
    test set up its fixtures, and they were taken for toolkit fixtures. A thread alive before a
    test starts is now not that test's; what it reaches is listed at the end of the run."""
    result = run_guarded(pytester, monkeypatch, LEFTOVER_TESTS)
    result.stdout.fnmatch_lines(
        [
            "*toolkit reached by threads that outlived their test*",
            "thread 'baseline-job_0' (starting the worker) during "
            "test_inner.py::test_unmarked_with_the_project_fixture",
        ]
    )
    blamed = "test_unmarked_with_the_project_fixture uses fixture"
    assert not any(blamed in line for line in result.stdout.lines)
    result.assert_outcomes(passed=4, failed=1, errors=1)
