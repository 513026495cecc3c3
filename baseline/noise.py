"""A warning when an image-like input is fed generated random noise.

On uniform noise a detector finds nothing, a classifier's top class is arbitrary and an fp16 or
int8 build is judged on activations no photograph produces: the gates pass or fail on numbers
that say little about the shipped model. The check reads only the lock (generated fixtures
have a seed and no source file), so `lock` and every report can say it.
"""

from __future__ import annotations

from baseline.models.lock import ModelLock
from baseline.models.tensors import TensorSpec

IMAGE_CHANNELS = (1, 3, 4)
MIN_IMAGE_SIDE = 16


def noise_warnings(model: ModelLock) -> list[str]:
    """One line per 4-D image-like input of `model` that the lock's generated fixtures feed with noise."""
    if model.fixtures.source is not None:
        return []
    images = model.fixtures.images  # the one input fed with photos; the others are generated
    return [
        f"model {model.name!r}: input {spec.name!r} {spec.shape} looks like an image but its fixtures are "
        f"generated random noise (fixtures.seed = {model.fixtures.seed}); the gates judge the model on "
        "inputs no camera produces — point fixtures.images at real photos "
        "(a folder, glob or dataset.txt) for this model"
        for spec in model.onnx.inputs
        if looks_like_image(spec) and (images is None or spec.name != images.input)
    ]


def looks_like_image(spec: TensorSpec) -> bool:
    """`[N, C, H, W]` or `[N, H, W, C]` of floats (or uint8) with 1, 3 or 4 channels and sides ≥ 16."""
    if len(spec.shape) != 4 or not (spec.dtype.startswith("float") or spec.dtype == "uint8"):
        return False
    _, *rest = spec.shape
    dims = [dim if isinstance(dim, int) else None for dim in rest]
    for channels, sides in ((dims[0], dims[1:]), (dims[2], dims[:2])):
        if channels in IMAGE_CHANNELS and all(side is None or side >= MIN_IMAGE_SIDE for side in sides):
            return True
    return False
