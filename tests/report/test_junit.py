"""JUnit XML: parses, counts match the report, expected failures are skipped, not failed."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from baseline.models.lock import Lock
from baseline.models.results import Report, Status
from baseline.report.junit import case_name, render_junit
from baseline.verification import verify

SCHEMA = Path(__file__).with_name("junit-10.xsd")
"""pytest's own JUnit schema (provenance in the file's first comment)."""


@pytest.fixture(scope="module")
def schema() -> object:
    xmlschema = pytest.importorskip("xmlschema")  # the `test` extra has it
    return xmlschema.XMLSchema(SCHEMA)


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


def test_the_xml_is_valid_against_pytest_s_junit_schema(handmade: Report, schema) -> None:
    written = render_junit(handmade, seconds=12.3456)
    schema.validate(written)
    root = ET.fromstring(written)
    suite = root.find("testsuite")
    assert suite is not None
    assert root.get("time") == suite.get("time") == "12.346"
    assert root.get("skipped") is None and suite.get("skipped") == "2"


@pytest.mark.toolkit
def test_the_verified_demo_is_valid_against_pytest_s_junit_schema(
    verified: tuple[Report, Lock], schema
) -> None:
    schema.validate(render_junit(verified[0], seconds=0.5))


def test_the_schema_refuses_what_the_xml_used_to_say(handmade: Report, schema) -> None:
    """The schema is strict where it matters: `skipped` on `<testsuites>` (what this wrote
    before), or a `time` with a unit, is invalid."""
    root = ET.fromstring(render_junit(handmade, seconds=1.0))
    root.set("skipped", "2")
    assert not schema.is_valid(ET.tostring(root, encoding="unicode"))
    root.attrib.pop("skipped")
    root.set("time", "1.0s")
    assert not schema.is_valid(ET.tostring(root, encoding="unicode"))


def test_without_a_duration_there_is_no_time(handmade: Report, schema) -> None:
    written = render_junit(handmade)
    schema.validate(written)
    assert "time=" not in written


def test_verify_writes_how_long_it_took(
    tmp_path: Path, cli, handmade: Report, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command times the verification it ran (here one that takes 0.2 s)."""

    def slow_verify(*args: object, **kwargs: object) -> Report:
        time.sleep(0.2)
        return handmade

    monkeypatch.setattr(verify, "verify_project", slow_verify)
    (tmp_path / "pyproject.toml").write_text("")
    code, out, _ = cli(tmp_path, "verify", "--format", "junit")
    took = ET.fromstring(out).get("time")
    assert code == 1 and took is not None and 0.2 <= float(took) < 30
