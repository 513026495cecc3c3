"""A failing verify report opened in headless Chromium (skipped without one; no toolkit): the
browser parses the page as written, failures on top, passes collapsed, the pictures drawn."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

from baseline.files.pictures import FixturePicture
from baseline.gates.drift import DriftMetrics
from baseline.models.lock import Lock
from baseline.models.results import GateResult, Report, Status
from baseline.report.html import render_html
from tests.report.conftest import chromium_or_skip, open_in_chromium
from tests.report.test_mask_pictures import failed_segmentation
from tests.report.test_task_pictures import task_report
from tests.tasks.conftest import IMAGES


class Rendered(HTMLParser):
    """What the browser kept: result statuses in order, the passes' `<details>`, pictures."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: list[str] = []
        self.passes_open: bool | None = None
        self.masks = 0
        self.moved_bars: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {key: value or "" for key, value in attrs}
        if tag == "td" and found.get("class", "").startswith("status "):
            self.statuses.append(found["class"].split("s-")[-1])
        elif tag == "details" and found.get("class") == "passes":
            self.passes_open = "open" in found
        elif tag == "image" and found.get("class") == "mask":
            self.masks += 1
        elif tag == "rect" and found.get("class") == "moved beyond":
            self.moved_bars.append(found.get("data-statistic", ""))


def failing_report(handmade: Report, demo_lock: Lock) -> Report:
    """36 passes around a drift of 202× allowed on one statistic and a failed segmentation."""
    reference = demo_lock.model("classifier").reference("rknn-sim", "rk3588")  # type: ignore[union-attr]
    assert reference is not None
    logits = next(stats for stats in reference.outputs if stats.name == "logits")
    assert logits.max is not None
    moved = logits.model_copy(update={"max": logits.max + 202 * (1e-5 + 1e-3 * abs(logits.max))})
    drift = next(r for r in handmade.results if r.gate == "drift").model_copy(
        update={
            "metrics": DriftMetrics.model_validate(
                {"outputs": {"logits": {"worst_ratio": 202.0, "candidate": moved.model_dump()}}}
            )
        }
    )
    segmentation = task_report(failed_segmentation()).results[0]
    passes = [
        GateResult(model="classifier", gate="integrity", status=Status.PASS, summary=f"file {i} matches")
        for i in range(36)
    ]
    others = [r for r in handmade.results if r.gate != "drift" and r.status != Status.PASS]
    return handmade.model_copy(update={"results": [*passes[:20], drift, *others, segmentation, *passes[20:]]})


def test_a_failing_report_as_the_browser_draws_it(handmade: Report, demo_lock: Lock, tmp_path: Path) -> None:
    chromium_or_skip()
    photo = (IMAGES / "receipt.jpg").read_bytes()
    picture = FixturePicture("image/jpeg", photo, width=96, height=64, letterbox=False)
    page = tmp_path / "report.html"
    page.write_text(
        render_html(failing_report(handmade, demo_lock), demo_lock, lambda model, sample: picture)
    )
    shot = tmp_path / "report.png"
    parsed = Rendered()
    parsed.feed(open_in_chromium(page, shot, height=2000))
    assert parsed.statuses == ["fail", "error", "fail", "skip", "xfail", *["pass"] * 36]
    assert parsed.passes_open is False
    assert parsed.masks == 6 and parsed.moved_bars == ["max"]
    assert shot.is_file() and shot.stat().st_size > 50_000
