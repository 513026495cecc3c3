"""JUnit XML for CI dashboards: one test suite per lock, one test case per gate result.

An expected failure (`xfail`) is reported as skipped with an `xfail:` message, the way
pytest does: it is known, not a failure. The shape is the one pytest's own JUnit schema allows
(tests/report/junit-10.xsd): `skipped` counts on the suite, not on `<testsuites>`; `time` in
seconds with at most three decimals.
"""

from __future__ import annotations

import re
import socket
import xml.etree.ElementTree as ET
from datetime import datetime, timezone

from baseline.models.results import GateResult, Report, Status, place_label

_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Characters XML 1.0 cannot hold at all (toolkit logs carry ANSI escapes)."""


def render_junit(
    report: Report,
    timestamp: datetime | None = None,
    hostname: str | None = None,
    seconds: float | None = None,
) -> str:
    """The report as JUnit XML (the format Jenkins, GitLab and GitHub test reporters read).

    The suite carries when and where it was written (`timestamp`, `hostname`, as pytest's
    does) and, given `seconds`, how long the verification took; dashboards group, age and
    time runs by them. Test cases carry no `time`: a job runs several gates at once and a
    cached result took none, so a per-gate duration would be made up.
    """
    written = (timestamp or datetime.now(timezone.utc)).isoformat(timespec="seconds")
    counts = report.counts()
    totals = {
        "tests": str(len(report.results)),
        "failures": str(counts[Status.FAIL.value]),
        "errors": str(counts[Status.ERROR.value]),
    }
    took = {} if seconds is None else {"time": f"{max(seconds, 0.0):.3f}"}
    root = ET.Element("testsuites", {"name": "baseline", **totals, **took})
    skipped = {"skipped": str(counts[Status.SKIP.value] + counts[Status.XFAIL.value])}
    where = {"timestamp": written, "hostname": _clean(hostname or socket.gethostname())}
    suite = ET.SubElement(root, "testsuite", {"name": "baseline", **totals, **skipped, **took, **where})
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", {"name": "lock", "value": _clean(report.lock)})
    for result in report.results:
        _testcase(suite, result)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def case_name(result: GateResult) -> str:
    """`gate[backend/target]` with the parts the result has: `drift[rknn-sim/rk3588]`, `integrity`."""
    where = place_label(result.backend, result.target)
    return f"{result.gate}[{where}]" if where else result.gate


def _testcase(suite: ET.Element, result: GateResult) -> None:
    names = {"classname": _clean(f"baseline.{result.model}"), "name": _clean(case_name(result))}
    case = ET.SubElement(suite, "testcase", names)
    if result.status == Status.FAIL:
        _outcome(case, "failure", result.summary, _explanation(result))
    elif result.status == Status.ERROR:
        _outcome(case, "error", result.summary, _explanation(result))
    elif result.status == Status.SKIP:
        _outcome(case, "skipped", result.summary, "")
    elif result.status == Status.XFAIL:
        _outcome(case, "skipped", f"xfail: {result.summary}", _explanation(result))
    ET.SubElement(case, "system-out").text = _clean(result.summary)


def _outcome(case: ET.Element, tag: str, message: str, text: str) -> None:
    element = ET.SubElement(case, tag, {"message": _clean(message)})
    if text:
        element.text = _clean(text)


def _explanation(result: GateResult) -> str:
    lines = list(result.details)
    if result.hint:
        lines.append(f"hint: {result.hint}")
    return "\n".join(lines)


def _clean(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)
