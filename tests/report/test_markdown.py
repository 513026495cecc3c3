"""The pull-request comment: verdict, a table that pipes cannot break, failures in <details>."""

from __future__ import annotations

import re

import pytest

from baseline.models.lock import Lock
from baseline.models.results import Report
from baseline.report.markdown import render_markdown

UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def _table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| ")]


def test_verdict_table_and_a_section_per_failure(handmade: Report) -> None:
    text = render_markdown(handmade)
    assert text.startswith("### baseline verify: **FAILED** — 1 pass, 1 fail, 1 skip, 1 error, 1 xfail\n")
    rows = _table_rows(text)
    assert rows[0] == "| status | model | gate | backend / target | summary |"
    assert len(rows) == 1 + len(handmade.results)
    assert "| **FAIL** | classifier | drift | rknn-sim/rk3588 |" in text
    assert "| XFAIL | classifier | consistency | rknn-sim/rk3588-w8a8 |" in text
    assert text.count("<details>") == 2 and text.count("</details>") == 2  # the fail and the error
    assert "<summary><b>FAIL classifier drift rknn-sim/rk3588</b></summary>" in text
    assert "**hint:** if the change is intended, run `baseline lock`" in text


def test_pipes_in_cells_are_escaped(handmade: Report) -> None:
    rows = _table_rows(render_markdown(handmade))
    drift = next(row for row in rows if "drift" in row)
    assert r"\|Δ\| 0.0288" in drift
    assert all(len(UNESCAPED_PIPE.findall(row)) == 6 for row in rows)  # 5 cells, never more


def test_markup_in_user_text_is_escaped(handmade: Report) -> None:
    text = render_markdown(handmade)
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert "- \x1b[31mred\x1b[0m &lt;b&gt;" in text


@pytest.mark.toolkit
def test_retrained_demo_explains_the_drift(retrained: tuple[Report, Lock]) -> None:
    report, _ = retrained
    text = render_markdown(report)
    assert "**FAILED**" in text.splitlines()[0]
    failing = [r for r in report.results if not r.status.ok]
    assert {r.gate for r in failing} >= {"integrity", "artifact", "drift"}
    assert text.count("<details>") == len(failing)
    assert "if the change is intended, run `baseline lock` to take the new baseline" in text
