"""A warning when an image-like input is fed generated random noise.

On uniform noise a detector finds nothing, a classifier's top class is arbitrary and an fp16 or
int8 build is judged on activations no photograph produces: the gates pass or fail on numbers
that say little about the shipped model. The check reads only the lock (generated fixtures
have a seed and no source file), so `lock` and every report can say it.
"""

from __future__ import annotations

from baseline.models.lock import ModelLock
from baseline.models.tensors import TensorSpec

COLOUR_CHANNELS = (3, 4)
MIN_IMAGE_SIDE = 16
MIN_LARGE_GREY_SIDE = 128
"""A channel-last grey input with unequal sides is an image only when both are at least this
(a 480×640 frame); below, it is more likely audio features (VGGish's 96×64×1, mel 76×32×1)."""


def noise_warnings(model: ModelLock) -> list[str]:
    """One line per 4-D image-like input of `model` that the lock's generated fixtures feed with noise."""
    if model.fixtures.source is not None:
        return []
    images = model.fixtures.images  # the one input fed with photos; the others are generated
    return [
        f"model {model.name!r}: input {spec.name!r} {spec.shape} looks like an image but its fixtures are "
        f"generated random noise (fixtures.seed = {model.fixtures.seed}); the gates judge the model on "
        f"inputs no camera produces — {_real_inputs(spec)} for this model"
        for spec in model.onnx.inputs
        if looks_like_image(spec) and (images is None or spec.name != images.input)
    ]


def _real_inputs(spec: TensorSpec) -> str:
    """Where real inputs come from: photos feed 3 colours or 1 grey channel; four channels (RGBA,
    or a satellite's four bands: ukis-csmask's `[N, 4, 256, 256]`) only a `.npz` of them. One
    channel may be a picture or a spectrogram (hawkears' bird-call classifier takes
    `[100, 1, 64, 384]` mel frames, an OCR line `[1, 1, 48, 320]`): both ways are said."""
    photos = "point fixtures.images at real photos (a folder, glob, dataset.txt or one image)"
    channels = (spec.shape[1], spec.shape[3])
    if 4 in channels and 3 not in channels:
        return "give real inputs as a .npz in fixtures.path (photos feed 3 colour channels or 1 grey, not 4)"
    if 3 not in channels:
        sensors = "recorded inputs as a .npz in fixtures.path"
        return f"{photos}, or if it is a spectrogram or other sensor data, {sensors}"
    return photos


def looks_like_image(spec: TensorSpec) -> bool:
    """Whether a 4-D input of floats (or uint8) is a picture a camera could give. The rule:

    - colour, 3 or 4 channels on axis 1 (NCHW) or 3 (NHWC): both sides ≥ 16, or symbolic;
    - grey, 1 channel on axis 1 (NCHW: MNIST's 28×28, an OCR line's 48×320): the same;
    - grey, 1 channel on axis 3 (NHWC; also how TensorFlow lays out audio features, frames ×
      bins × 1): both sides known and ≥ 16, and square (Keras MNIST's 28×28×1) or both ≥ 128.

    So `[N, 76, 32, 1]` (76 mel frames × 32 bins), `[1, 80, 3000]` and `[1, 128, 1, 32]` are not
    warned about; a feature map (`[1, 80, 20, 20]`) or a thumbnail below 16 pixels is not either.
    """
    if len(spec.shape) != 4 or not (spec.dtype.startswith("float") or spec.dtype == "uint8"):
        return False
    _, *rest = spec.shape
    first, middle, last = [dim if isinstance(dim, int) else None for dim in rest]
    return (
        _channel_first_image(first, middle, last)
        or _colour_image(last, first, middle)
        or (last == 1 and _grey_channel_last_image(first, middle))
    )


def _channel_first_image(channels: int | None, height: int | None, width: int | None) -> bool:
    return (channels == 1 or channels in COLOUR_CHANNELS) and _sides_fit(height, width)


def _colour_image(channels: int | None, height: int | None, width: int | None) -> bool:
    return channels in COLOUR_CHANNELS and _sides_fit(height, width)


def _grey_channel_last_image(height: int | None, width: int | None) -> bool:
    if height is None or width is None or not _sides_fit(height, width):
        return False
    return height == width or min(height, width) >= MIN_LARGE_GREY_SIDE


def _sides_fit(height: int | None, width: int | None) -> bool:
    """Both sides at least `MIN_IMAGE_SIDE`; a symbolic side (`H`, `W`) may be any size."""
    return all(side is None or side >= MIN_IMAGE_SIDE for side in (height, width))
