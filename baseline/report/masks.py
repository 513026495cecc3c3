"""Segmentation label maps as pictures: palette PNGs written with the standard library (no
pillow at run time), laid over the fixture photograph in the HTML report.

Class 0 is left clear (the background of VOC-style maps and of a thresholded probability map
such as DBNet's); every other class gets a colour of a colour-blind-safe cycle, half opaque.
"""

from __future__ import annotations

import base64
import struct
import zlib

from baseline.models.task import LabelMap

CLASS_COLOURS = [
    (0, 114, 178), (230, 159, 0), (0, 158, 115), (204, 121, 167), (86, 180, 233),
    (213, 94, 0), (240, 228, 66), (0, 0, 0), (153, 153, 153), (117, 112, 179),
]  # fmt: skip
"""The Okabe-Ito colours and two more, cycled over classes 1, 2, …"""
CLASS_ALPHA = 150
DISAGREE_COLOUR = (214, 39, 40)


def class_colour(class_id: int) -> tuple[int, int, int]:
    return CLASS_COLOURS[(class_id - 1) % len(CLASS_COLOURS)]


def class_hex(class_id: int) -> str:
    """`#rrggbb` of a class, for the report's key."""
    return "#" + "".join(f"{part:02x}" for part in class_colour(class_id))


def labels_png(labels: LabelMap) -> bytes:
    """The label map as a palette PNG: class `i` is palette entry `i`, class 0 transparent."""
    palette = [(0, 0, 0)] + [class_colour(i) for i in range(1, 256)]
    alpha = [0] + [CLASS_ALPHA] * 255
    return palette_png(labels.width, labels.height, labels.pixels(), palette, alpha)


def disagreement(golden: LabelMap, candidate: LabelMap) -> tuple[bytes, int]:
    """One byte a pixel, 1 where golden and candidate classes differ; and how many do."""
    if (golden.height, golden.width) != (candidate.height, candidate.width):
        raise ValueError("golden and candidate label maps differ in size")
    marks = bytes(g != c for g, c in zip(golden.pixels(), candidate.pixels(), strict=True))
    return marks, marks.count(1)


def disagreement_png(golden: LabelMap, candidate: LabelMap) -> bytes:
    """The pixels whose class changed, opaque red; the rest transparent."""
    marks, _ = disagreement(golden, candidate)
    return palette_png(golden.width, golden.height, marks, [(0, 0, 0), DISAGREE_COLOUR], [0, 255])


def palette_png(
    width: int, height: int, indices: bytes, palette: list[tuple[int, int, int]], alpha: list[int]
) -> bytes:
    """An 8-bit palette PNG of `indices` (one byte a pixel, row by row), `alpha` per palette entry."""
    rows = b"".join(b"\x00" + indices[row * width : (row + 1) * width] for row in range(height))
    return b"".join(
        [
            b"\x89PNG\r\n\x1a\n",
            _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 3, 0, 0, 0)),
            _chunk(b"PLTE", b"".join(bytes(colour) for colour in palette)),
            _chunk(b"tRNS", bytes(alpha)),
            _chunk(b"IDAT", zlib.compress(rows, 9)),
            _chunk(b"IEND", b""),
        ]
    )


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
