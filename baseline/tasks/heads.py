"""Raw detection heads, spread over several outputs: what a model gives when the decoder is left
to the board code, as Rockchip's model zoo does for YOLOv8 (DFL branches) and RetinaFace (priors).

Both are decoded here in plain numpy into the corners, scores and classes the matcher in
`baseline.tasks.detection` compares; they mirror the zoo's Python post-processing (same
layouts, strides, priors and variances), written from its description, without torch.
"""

from __future__ import annotations

from math import ceil

import numpy as np

from baseline.errors import InputError

DFL_STRIDES = 3
"""Branches of a YOLOv8 DFL head: strides 8, 16, 32 (read from the grid sizes, not assumed)."""
PRIOR_MIN_SIZES = ((16, 32), (64, 128), (256, 512))
PRIOR_STEPS = (8, 16, 32)
VARIANCES = (0.1, 0.2)


def dfl_distances(box: np.ndarray) -> np.ndarray:
    """`[4 * bins, h, w]` logits → `[4, h, w]` distances (left, top, right, bottom) in grid cells:
    the expectation of each side's softmax over its bins."""
    bins = box.shape[0] // 4
    logits = box.reshape(4, bins, *box.shape[1:]).astype(np.float64)
    logits = logits - logits.max(axis=1, keepdims=True)
    weights = np.exp(logits)
    weights /= weights.sum(axis=1, keepdims=True)
    return np.asarray((weights * np.arange(bins).reshape(1, bins, 1, 1)).sum(axis=1))


def decode_yolov8_dfl(
    branches: list[np.ndarray], input_size: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Corners `[A, 4]` in input pixels and class scores `[A, C]` of every cell of every branch.

    `branches` holds, per stride, the box output `[4 * bins, h, w]`, the class output
    `[C, h, w]` and optionally the score sum (ignored, as the zoo's Python code does).
    """
    per_branch = len(branches) // DFL_STRIDES
    corners, scores = [], []
    for index in range(DFL_STRIDES):
        box, classes = branches[per_branch * index], branches[per_branch * index + 1]
        _check_branch(box, classes, index)
        corners.append(_branch_corners(box, input_size))
        scores.append(classes.reshape(classes.shape[0], -1).T)
    return np.concatenate(corners), np.concatenate(scores)


def _check_branch(box: np.ndarray, classes: np.ndarray, index: int) -> None:
    if box.ndim != 3 or box.shape[0] % 4 or classes.ndim != 3 or box.shape[1:] != classes.shape[1:]:
        raise InputError(
            f"yolov8-dfl branch {index}: expected box [4 * bins, h, w] and classes [C, h, w] on the "
            f"same grid, got {list(box.shape)} and {list(classes.shape)}; list `outputs` per branch "
            "as box, classes(, score sum)"
        )


def _branch_corners(box: np.ndarray, input_size: tuple[int, int]) -> np.ndarray:
    height, width = box.shape[1:]
    stride_y, stride_x = input_size[0] / height, input_size[1] / width
    distances = dfl_distances(box)
    column, row = np.meshgrid(np.arange(width) + 0.5, np.arange(height) + 0.5)
    corners = np.stack(
        [
            (column - distances[0]) * stride_x,
            (row - distances[1]) * stride_y,
            (column + distances[2]) * stride_x,
            (row + distances[3]) * stride_y,
        ],
        axis=-1,
    )
    return corners.reshape(-1, 4)


def prior_boxes(input_size: tuple[int, int]) -> np.ndarray:
    """RetinaFace's priors `[P, 4]` (cx, cy, w, h, relative to the input), in the model's order:
    stride by stride, row by row, column by column, then each min size."""
    height, width = input_size
    priors = []
    for step, sizes in zip(PRIOR_STEPS, PRIOR_MIN_SIZES, strict=True):
        rows, columns = ceil(height / step), ceil(width / step)
        cy, cx, size = np.meshgrid(
            (np.arange(rows) + 0.5) * step / height,
            (np.arange(columns) + 0.5) * step / width,
            np.asarray(sizes, dtype=np.float64),
            indexing="ij",
        )
        priors.append(np.stack([cx, cy, size / width, size / height], axis=-1).reshape(-1, 4))
    return np.concatenate(priors)


def decode_retinaface(
    loc: np.ndarray, conf: np.ndarray, input_size: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Corners `[P, 4]` in input pixels and face scores `[P]` from `loc [P, 4]` and `conf [P, 2]`."""
    priors = prior_boxes(input_size)
    if loc.shape != priors.shape or conf.ndim != 2 or conf.shape[0] != len(priors) or conf.shape[1] < 2:
        raise InputError(
            f"retinaface: expected loc [{len(priors)}, 4] and conf [{len(priors)}, 2] for input "
            f"{list(input_size)}, got {list(loc.shape)} and {list(conf.shape)}; check `input_size`"
        )
    centre = priors[:, :2] + loc[:, :2] * VARIANCES[0] * priors[:, 2:]
    size = priors[:, 2:] * np.exp(np.clip(loc[:, 2:] * VARIANCES[1], None, 50.0))  # no overflow on noise
    height, width = input_size
    scale = np.array([width, height, width, height], dtype=np.float64)
    return np.concatenate([centre - size / 2, centre + size / 2], axis=1) * scale, conf[:, 1]
