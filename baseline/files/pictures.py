"""The fixture photographs a report draws detections on, read from the files the lock pins.

The reports embed each image file as it is (JPEG or PNG bytes, base64), never re-encoded:
pillow is not a runtime dependency, and the browser decodes both. Boxes are in the model's
input pixels, so a picture carries the input size and how the image was fitted to it
(stretched, or letterboxed into the top-left corner, as `baseline.files.images` feeds it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from baseline.errors import BaselineError
from baseline.files.images import colour_layout
from baseline.models.lock import Lock, ModelLock
from baseline.project.layout import Project

MAX_PICTURE_BYTES = 4 * 1024 * 1024
"""A fixture photograph larger than this is left out of the report rather than bloat it."""
_MAGIC = {b"\xff\xd8\xff": "image/jpeg", b"\x89PNG\r\n\x1a\n": "image/png"}


@dataclass(frozen=True)
class FixturePicture:
    """One fixture image file and the model input it was fitted to."""

    mime: str
    data: bytes
    width: int
    height: int
    """The model's input size in pixels: the coordinates the boxes are in."""
    letterbox: bool
    """True: scaled with its aspect kept into the top-left corner; False: stretched to the input."""


PictureSource = Callable[[str, int], "FixturePicture | None"]
"""`(model, sample) -> picture`, or None where the sample was not made from an image."""


def fixture_pictures(project: Project, lock: Lock) -> PictureSource:
    """The pictures of the lock's image fixtures, read when a report asks for one."""

    def picture(model: str, sample: int) -> FixturePicture | None:
        entry = lock.model(model)
        return _picture(project, entry, sample) if entry is not None else None

    return picture


def _picture(project: Project, model: ModelLock, sample: int) -> FixturePicture | None:
    images = model.fixtures.images
    if images is None or not 0 <= sample < len(images.files):
        return None
    size = input_size(model, images.input)
    if size is None:
        return None
    try:
        path = project.pinned(images.files[sample], f"models.{model.name}.fixtures.images.files[{sample}]")
        if path.stat().st_size > MAX_PICTURE_BYTES:
            return None
        data = path.read_bytes()
    except (OSError, BaselineError):  # a picture is a courtesy: the gates report broken files
        return None
    mime = next((kind for magic, kind in _MAGIC.items() if data.startswith(magic)), None)
    if mime is None:
        return None
    return FixturePicture(mime, data, width=size[1], height=size[0], letterbox=images.resize == "letterbox")


def input_size(model: ModelLock, name: str) -> tuple[int, int] | None:
    """`(height, width)` of a static NCHW or NHWC image input (3 colours or 1 grey), else None."""
    spec = next((spec for spec in model.onnx.inputs if spec.name == name), None)
    if spec is None or not spec.is_static or len(spec.shape) != 4:
        return None
    shape = [int(dim) for dim in spec.shape]
    layout = colour_layout(shape)
    if layout is None:
        return None
    return (shape[2], shape[3]) if layout == "nchw" else (shape[1], shape[2])
