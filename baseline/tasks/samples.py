"""From stacked outputs to one array per image, labelled with where it came from.

Backends stack outputs over fixture samples: `[samples, *model_output_shape]`. The model's
own batch dimension, when it has one, follows. Task comparisons work image by image, so
this module peels both leading axes off and keeps the indices for messages.
"""

from __future__ import annotations

import numpy as np

from baseline.errors import InputError
from baseline.models.task import SampleRef

Image = tuple[SampleRef, np.ndarray]


def stacked_axis(axis: int, model_ndim: int, what: str) -> int:
    """The axis of the stacked array for `axis` of the model's output (negative counts from the end)."""
    if not -model_ndim <= axis < model_ndim:
        raise InputError(f"{what}: axis {axis} is out of range for an output with {model_ndim} dims")
    return axis + 1 if axis >= 0 else model_ndim + axis + 1


def split_images(array: np.ndarray, image_ndim: int, what: str) -> list[Image]:
    """`[samples, (batch,) *image]` as a list of `(SampleRef, image)`; a batch of one is not labelled."""
    if array.ndim == image_ndim + 1:
        return [(SampleRef(sample=index), array[index]) for index in range(array.shape[0])]
    if array.ndim == image_ndim + 2:
        batch = array.shape[1]
        return [
            (SampleRef(sample=index, batch=None if batch == 1 else item), array[index, item])
            for index in range(array.shape[0])
            for item in range(batch)
        ]
    raise InputError(
        f"{what}: expected [samples, (batch,) {image_ndim} image dims], got shape {list(array.shape)}"
    )


def class_last(array: np.ndarray, class_axis: int, what: str) -> np.ndarray:
    """The stacked array with the model's class axis moved to the end."""
    return np.moveaxis(array, stacked_axis(class_axis, array.ndim - 1, what), -1)
