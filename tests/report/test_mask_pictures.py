"""A failed segmentation in the HTML report: golden, candidate and changed pixels drawn over the
fixture photograph (no toolkit: the comparison is made from hand-written score maps)."""

from __future__ import annotations

import struct
import zlib
from html.parser import HTMLParser

import numpy as np

from baseline.files.pictures import FixturePicture
from baseline.models.task import LabelMap, SegmentationComparison, SegmentationTask, TaskOutcome
from baseline.report.html import render_html
from baseline.report.masks import disagreement
from baseline.tasks.compare import compare_task
from baseline.tasks.segmentation import MAX_DRAWN_SAMPLES, compare_segmentation, encode_labels
from tests.report.conftest import assert_well_formed
from tests.report.test_task_pictures import task_report
from tests.tasks.conftest import IMAGES

NAMES = ["background", "person", "dog"]


def scores(labels: np.ndarray, classes: int = 3) -> np.ndarray:
    """One-hot score maps `[samples, 1, classes, H, W]` (the output `[1, C, H, W]` per sample)."""
    return np.asarray(np.moveaxis(np.eye(classes, dtype=np.float32)[labels], -1, 1)[:, None])


def failed_segmentation() -> TaskOutcome:
    golden = np.zeros((3, 64, 96), dtype=np.int64)
    golden[:, 10:40, 20:50] = 1  # a person
    golden[:, 45:60, 60:90] = 2  # a dog
    candidate = golden.copy()
    candidate[1, 45:60, 60:75] = 1  # sample 1: half the dog became a person
    candidate[2, 10:12, 20:50] = 0  # sample 2: two rows of the person lost
    spec = SegmentationTask(output="masks", class_names=NAMES)
    return compare_task(spec, {"masks": scores(golden)}, {"masks": scores(candidate)})


class Panels(HTMLParser):
    """Per segmentation panel (`<svg class="... masks KIND">`): its photograph and mask images."""

    def __init__(self) -> None:
        super().__init__()
        self.panels: list[tuple[str, list[dict[str, str]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {key: value or "" for key, value in attrs}
        if tag == "svg" and "masks" in found.get("class", "").split():
            self.panels.append((found["class"].split()[-1], []))
        elif self.panels and tag in ("image", "use"):
            self.panels[-1][1].append({"tag": tag, **found})


def png_pixels(uri: str) -> tuple[int, int, bytes]:
    """Width, height and palette indices of an 8-bit palette PNG `data:` URI (no filter bytes)."""
    import base64

    data = base64.b64decode(uri.split(",", 1)[1])
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    width, height, depth, kind = struct.unpack(">IIBB", data[16:26])
    assert (depth, kind) == (8, 3)
    idat, offset = b"", 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        if data[offset + 4 : offset + 8] == b"IDAT":
            idat += data[offset + 8 : offset + 8 + length]
        offset += 12 + length
    raw = zlib.decompress(idat)
    rows = [raw[row * (width + 1) + 1 : (row + 1) * (width + 1)] for row in range(height)]
    return width, height, b"".join(rows)


def test_the_disagreeing_samples_keep_their_label_maps_worst_first() -> None:
    outcome = failed_segmentation()
    comparison = outcome.comparison
    assert isinstance(comparison, SegmentationComparison) and not outcome.passed
    kept = [s.where.sample for s in comparison.samples if s.golden_labels is not None]
    assert kept == [1, 2]  # sample 0 agrees everywhere: nothing to draw
    golden, candidate = comparison.samples[1].golden_labels, comparison.samples[1].candidate_labels
    assert golden is not None and candidate is not None
    assert (golden.height, golden.width, golden.stride) == (64, 96, 1)
    assert disagreement(golden, candidate)[1] == 15 * 15

    large = encode_labels(np.ones((600, 300), dtype=np.int64) * 300)  # strided, saturated
    assert (large.height, large.width, large.stride, set(large.pixels())) == (200, 100, 3, {255})
    many = np.zeros((MAX_DRAWN_SAMPLES + 3, 1, 2, 4, 4), dtype=np.float32)
    moved = many.copy()
    moved[:, 0, 1, 0, 0] = 1.0
    spec = SegmentationTask(output="masks")
    assert sum(s.golden_labels is not None for s in compare_segmentation(spec, many, moved).samples) == (
        MAX_DRAWN_SAMPLES
    )


def test_a_failed_segmentation_is_drawn_over_the_photograph() -> None:
    photo = (IMAGES / "receipt.jpg").read_bytes()
    picture = FixturePicture("image/jpeg", photo, width=96, height=64, letterbox=False)
    report = task_report(failed_segmentation())
    report = report.model_copy(
        update={"results": [report.results[0].model_copy(update={"model": "seg <b>"})]}
    )
    document = render_html(report, pictures=lambda model, sample: picture)
    assert_well_formed(document)
    parser = Panels()
    parser.feed(document)
    # worst sample first: golden | candidate | changed pixels, each over the photograph
    assert [kind for kind, _ in parser.panels] == ["golden", "candidate", "changed"] * 2
    for index, (_, images) in enumerate(parser.panels):
        if index % 3 == 0:  # the photograph inlined once per sample, the other two panels use it
            assert images[0]["href"].startswith("data:image/jpeg;base64,")
            photo_id = images[0]["id"]
        else:
            assert images[0] == {"tag": "use", "href": f"#{photo_id}"}
        assert images[1]["class"] == "mask" and images[1]["href"].startswith("data:image/png;base64,")
        assert (images[1]["width"], images[1]["height"]) == ("96", "64")
    width, height, golden = png_pixels(parser.panels[0][1][1]["href"])
    assert (width, height) == (96, 64) and golden.count(2) == 15 * 30
    _, _, candidate = png_pixels(parser.panels[1][1][1]["href"])
    assert candidate.count(2) == 15 * 15
    _, _, changed = png_pixels(parser.panels[2][1][1]["href"])
    assert changed.count(1) == 15 * 15
    assert "sample 1: golden | candidate | pixels whose class changed (red, 225 of 6144)" in document
    assert "class 2: IoU 0.500, 450 → 225 px" in document  # class names come with the lock
    assert "<h3>seg &lt;b&gt; · onnxruntime · against locked onnxruntime</h3>" in document
    assert "<b>" not in document
    assert document.count("data:image/jpeg") == 2  # one photograph per sample drawn


def test_without_photographs_the_masks_are_drawn_on_a_blank_canvas() -> None:
    document = render_html(task_report(failed_segmentation()))
    parser = Panels()
    parser.feed(document)
    assert len(parser.panels) == 6
    assert all(len(images) == 1 and images[0]["class"] == "mask" for _, images in parser.panels)
    assert "data:image/jpeg" not in document


def test_a_label_map_of_the_wrong_size_is_refused() -> None:
    broken = LabelMap(height=2, width=2, data=encode_labels(np.zeros((3, 3), dtype=np.int64)).data)
    try:
        broken.pixels()
    except ValueError as error:
        assert "not 2 x 2" in str(error)
    else:
        raise AssertionError("a label map of 9 bytes passed for 2 x 2")
