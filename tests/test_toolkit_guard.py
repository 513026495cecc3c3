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


def test_unmarked_tests_that_reach_the_toolkit_fail_naming_the_mark(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.delenv("BASELINE_TOOLCHAINS", raising=False)
    pytester.makepyfile(test_inner=INNER_TESTS)
    result = pytester.runpytest_subprocess("-p", "tests.toolkit_guard", "-p", "no:cacheprovider")
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
