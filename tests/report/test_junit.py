"""JUnit XML: parses, counts match the report, expected failures are skipped, not failed."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from baseline.models.lock import Lock
from baseline.models.results import Report, Status
from baseline.report.junit import case_name, render_junit


def _suite(report: Report) -> ET.Element:
    root = ET.fromstring(render_junit(report))
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1 and suites[0].get("name") == "baseline"
    return suites[0]


@pytest.mark.toolkit
def test_counts_and_names_match_the_verified_demo(verified: tuple[Report, Lock]) -> None:
    report, _ = verified
    suite = _suite(report)
    counts = report.counts()
    assert suite.get("tests") == str(len(report.results))
    assert suite.get("failures") == str(counts["fail"]) and suite.get("errors") == str(counts["error"])
    assert suite.get("skipped") == str(counts["skip"] + counts["xfail"])
    cases = suite.findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        (f"baseline.{r.model}", case_name(r)) for r in report.results
    ]
    assert ("baseline.classifier", "drift[rknn-sim/rk3588-w8a8]") in {
        (c.get("classname"), c.get("name")) for c in cases
    }


@pytest.mark.toolkit
def test_an_expected_failure_is_skipped_with_an_xfail_message(verified: tuple[Report, Lock]) -> None:
    report, _ = verified
    cases = _suite(report).findall("testcase")
    for case, result in zip(cases, report.results, strict=True):
        if result.status == Status.XFAIL:
            skipped = case.find("skipped")
            assert skipped is not None and skipped.get("message", "").startswith("xfail: expected failure")
            assert case.find("failure") is None


def test_failure_and_error_carry_summary_details_and_hint(handmade: Report) -> None:
    suite = _suite(handmade)
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (
        "5",
        "1",
        "1",
        "2",
    )
    drift, compilable = suite.findall("testcase")[1:3]
    failure = drift.find("failure")
    assert failure is not None and failure.get("message") == handmade.results[1].summary
    assert "baseline -0.317 → -0.288" in (failure.text or "")
    assert "hint: if the change is intended" in (failure.text or "")
    error = compilable.find("error")
    assert error is not None and error.get("message") == handmade.results[2].summary  # markup round-trips


def test_control_characters_from_logs_do_not_break_the_xml(handmade: Report) -> None:
    failure = _suite(handmade).findall("testcase")[1].find("failure")
    assert failure is not None
    assert "\x1b" not in (failure.text or "") and "\ufffd[31mred" in (failure.text or "")


def test_names_use_the_parts_a_result_has(handmade: Report) -> None:
    assert [case_name(r) for r in handmade.results[:3]] == [
        "integrity",
        "drift[rknn-sim/rk3588]",
        "compilable[rknn-sim/rk3588-w8a8]",
    ]


def test_the_suite_says_when_and_where(handmade: Report) -> None:
    from datetime import datetime, timezone

    written = datetime(2026, 11, 23, 10, 0, 5, 123, tzinfo=timezone.utc)
    suite = ET.fromstring(render_junit(handmade, written, "ci-runner-7")).find("testsuite")
    assert suite is not None
    assert (suite.get("timestamp"), suite.get("hostname")) == ("2026-11-23T10:00:05+00:00", "ci-runner-7")
    default = ET.fromstring(render_junit(handmade)).find("testsuite")
    assert default is not None and default.get("hostname") and default.get("timestamp")
