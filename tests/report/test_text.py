"""The text report: the plain rendering a pipe or CI log gets, and the coloured one a terminal gets,
say the same thing (the plain one skips building rich `Text` lines, see `render_lines`)."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from rich.console import Console

from baseline.cli.output import FORCING_A_TERMINAL, Output
from baseline.models.results import GateResult, Report, Status
from baseline.report.text import plain, render_lines, render_text


def _report() -> Report:
    results = [
        GateResult(model="m1", gate="drift", status=Status.PASS, backend="onnxruntime", summary="ok"),
        GateResult(
            model="m2",
            gate="consistency",
            status=Status.FAIL,
            summary="cosine 0.90 < 0.99",
            details=[f"output {i}\nforged" for i in range(25)],
            hint="loosen tolerances.consistency",
        ),
    ]
    return Report(lock="zoo.lock", results=results, warnings=["noise"])


def test_plain_and_coloured_reports_agree() -> None:
    report = _report()
    text = plain(render_lines(report))
    assert text == "".join(f"{line.plain}\n" for line in render_text(report))
    lines = text.splitlines()
    assert lines[0] == "baseline verify zoo.lock"
    assert lines[1].split() == ["PASS", "m1", "drift", "onnxruntime", "ok"]
    assert lines[2].startswith("FAIL  ") and "cosine 0.90 < 0.99" in lines[2]
    assert "        … 5 more" in lines and "        hint: loosen tolerances.consistency" in lines
    assert not any(line == "forged" for line in lines)  # a detail's newline stays in its line
    assert lines[-2:] == ["warning: noise", "FAILED: 1 pass, 1 fail"]


def test_output_writes_plain_to_a_pipe_and_styles_to_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    report = _report()
    piped, terminal = io.StringIO(), io.StringIO()
    for name in (*FORCING_A_TERMINAL, "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "stdout", piped)
    Output().lines(render_lines(report))
    assert piped.getvalue() == plain(render_lines(report))
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich decides, and styles
    output = Output()
    output.out = Console(file=terminal, width=400, force_terminal=True, highlight=False)
    output.lines(render_lines(report))
    assert "\x1b[1;31mFAIL" in terminal.getvalue()  # the failure in bold red
    assert "\x1b" not in piped.getvalue()


PRINTS = """
import sys
from baseline.cli.output import output
output.warning("[bold]w[/] :smile:\\nforged")
output.progress("p")
output.error("e")
output.note("n")
output.lines([[("line", "bold red")]])
print("rich" in sys.modules, file=sys.stderr)
"""


@pytest.mark.parametrize("forced", [False, True])
def test_a_ci_log_gets_plain_lines_without_rich_and_a_forced_terminal_gets_styles(forced: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k not in (*FORCING_A_TERMINAL, "NO_COLOR")}
    if forced:
        env["FORCE_COLOR"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", PRINTS], env=env, capture_output=True, text=True, check=True, timeout=60
    )
    if not forced:
        # what rich wrote there before, as written: markup and emoji codes are the user's text
        expected = ["warning: [bold]w[/] :smile:\\nforged", "… p", "error: e", "n", "False"]
        assert done.stderr.splitlines() == expected
        assert done.stdout == "line\n"
    else:
        assert "\x1b[1;33mwarning:" in done.stderr and done.stderr.splitlines()[-1] == "True"
        assert "\x1b[1;31mline" in done.stdout
