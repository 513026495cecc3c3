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


def test_verdict_failures_first_and_a_section_per_failure(handmade: Report) -> None:
    text = render_markdown(handmade)
    assert text.startswith("### baseline verify: **FAILED** — 1 pass, 1 fail, 1 skip, 1 error, 1 xfail\n")
    rows = _table_rows(text)
    header = "| status | model | gate | backend / target | summary |"
    assert rows[0] == header and rows.count(header) == 2  # the failures, then the rest collapsed
    assert len(rows) == 2 + len(handmade.results)
    assert rows[1].startswith("| **FAIL** | classifier | drift | rknn-sim/rk3588 |")
    assert rows[2].startswith("| **ERROR** |")
    assert "| XFAIL | classifier | consistency | rknn-sim/rk3588-w8a8 |" in text
    assert text.count("<details>") == 3 and text.count("</details>") == 3  # fail, error, the rest
    assert "<details><summary>1 pass, 1 skip, 1 xfail</summary>" in text
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
    assert "- \x1b\\[31mred\x1b\\[0m &lt;b&gt;" in text


@pytest.mark.toolkit
def test_retrained_demo_explains_the_drift(retrained: tuple[Report, Lock]) -> None:
    report, _ = retrained
    text = render_markdown(report)
    assert "**FAILED**" in text.splitlines()[0]
    failing = [r for r in report.results if not r.status.ok]
    assert {r.gate for r in failing} >= {"integrity", "artifact", "drift"}
    assert text.count("<details>") == len(failing) + 1  # each failure, and the passes collapsed
    assert "the model changed since the lock" in text and "if the change is intended, else revert it" in text


def test_a_large_report_stays_under_github_s_comment_limit(handmade: Report) -> None:
    """200 copies of each result: failures come first, the rest is cut with a note."""
    many = Report(
        lock=handmade.lock,
        results=[r.model_copy(update={"model": f"m{i}"}) for i in range(200) for r in handmade.results],
    )
    text = render_markdown(many, report_url="https://ci.example/run/1/report.html")
    assert len(text) <= 60_000 < len(render_markdown(many, limit=10**9))
    assert "[full report](https://ci.example/run/1/report.html)" in text.splitlines()[2]
    assert text.rstrip().endswith(
        "*The rest of the report is left out: a comment is limited to 60,000 characters.*"
    )
    assert text.count("<details>") == text.count("</details>"), "no section is left open"
    rows = _table_rows(text)
    assert rows[1].startswith("| **FAIL** | m0 |") and "| PASS |" not in text, (
        "failures fill the comment first"
    )


def test_a_pull_requests_names_render_no_mention_link_or_image(handmade: Report) -> None:
    """An ONNX output name is the pull request's text: in the bot's comment it must not ping a user,
    link out or load a remote image."""
    hostile = "@octocat [click](https://evil.example/x) ![pixel](https://evil.example/p.png) www.evil.example"
    failing = handmade.results[1].model_copy(
        update={"summary": f"output {hostile!r} drifted", "details": [f"output {hostile!r} mean moved"]}
    )
    text = render_markdown(handmade.model_copy(update={"results": [failing]}))
    for live in ("@octocat", "://", "www.evil"):
        assert live not in text, live
    assert not re.search(r"(?<!\\)[\[\]]", text)  # every bracket escaped: no link, no image
    assert "@\u2060octocat \\[click\\](https:\u2060//evil.example/x)" in text  # shown, inert
