"""Reports and the sign-off through the CLI, and the sign-off opened in a real browser."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import LOCK, tensor_file
from tests.report.conftest import chromium_or_skip, open_in_chromium

pytestmark = pytest.mark.toolkit  # every test here drives the real toolkit


@pytest.mark.parametrize("fmt", ["json", "junit", "markdown", "html", "text"])
def test_verify_writes_every_format_to_a_file(demo: Path, cli, fmt: str) -> None:
    target = demo / f"report.{fmt}"
    code, out, err = cli(demo, "verify", "--lock", str(LOCK), "--format", fmt, "--output", str(target))
    text = target.read_text()
    assert code == 0 and "report written to" in err and out == ""
    if fmt == "json":
        assert json.loads(text)["passed"] is True
    elif fmt == "junit":
        assert ET.fromstring(text).find("testsuite") is not None
    elif fmt == "markdown":
        assert text.startswith("### baseline verify: **PASSED**")
    elif fmt == "html":
        assert text.startswith("<!DOCTYPE html>") and "<svg" in text and "http" not in text
    else:
        assert "PASSED: " in text and "\x1b[" not in text


def test_signoff_markdown_with_deltas_since_a_previous_lock(demo: Path, cli, tmp_path: Path) -> None:
    previous = tmp_path / "previous.lock"
    previous.write_text((demo / LOCK).read_text().replace('onnxruntime = "', 'onnxruntime = "0.0.0-'))
    code, out, _ = cli(demo, "signoff", "--lock", str(LOCK), "--previous", str(previous))
    assert code == 0
    assert "## Pinned versions" in out and "- [ ]" in out and "- [x]" in out
    assert tensor_file(demo, "classifier", "rk3588", ".rknn").relative_to(demo).as_posix() in out


def test_signoff_html_renders_its_plots_in_headless_chromium(demo: Path, cli, tmp_path: Path) -> None:
    chromium_or_skip()
    page = tmp_path / "signoff.html"
    assert cli(demo, "signoff", "--lock", str(LOCK), "--format", "html", "--output", str(page))[0] == 0
    shot = tmp_path / "signoff.png"
    dom = open_in_chromium(page, shot)
    assert dom.count("<svg") >= 5 and "<polyline" in dom, "the browser parsed the inline plots"
    assert shot.is_file() and shot.stat().st_size > 50_000, "a rendered page with plots is not tiny"
