"""Named parts of outputs: slices along an axis, with their own statistics and agreement.

A YOLOv8 output `[1, 84, 8400]` mixes box coordinates in pixels with class scores in
[0, 1]; over the whole tensor the boxes dominate every statistic. Split into `boxes`
(channels 0:4) and `scores` (4:84), each part gets numbers of its own scale.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from baseline.compare import dot, tensor_stats
from baseline.errors import InputError
from baseline.models.part_results import ChannelStatistics, PartComparison, PartStatistics
from baseline.models.task import OutputPart
from baseline.models.tensors import TensorStats
from baseline.tasks.samples import stacked_axis


def slice_part(part: OutputPart, outputs: Mapping[str, np.ndarray]) -> np.ndarray:
    """The part's slice of its output (sample axis kept in front)."""
    if part.output not in outputs:
        raise InputError(f"part {part.name!r}: no output {part.output!r} (outputs: {sorted(outputs)})")
    array = outputs[part.output]
    axis = stacked_axis(part.axis, array.ndim - 1, f"part {part.name!r} of output {part.output!r}")
    size = array.shape[axis]
    if part.start >= size or (part.stop is not None and part.stop > size):
        raise InputError(
            f"part {part.name!r}: slice {part.start}:{part.stop} does not fit axis {part.axis} "
            f"of output {part.output!r} (size {size})"
        )
    return np.take(array, np.arange(part.start, part.stop if part.stop is not None else size), axis=axis)


def split_parts(parts: Sequence[OutputPart], outputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every part by `"<output>:<part name>"`."""
    return {f"{part.output}:{part.name}": slice_part(part, outputs) for part in parts}


def stats_with_parts(
    parts: Sequence[OutputPart], outputs: Mapping[str, np.ndarray], skip_unfit: bool = False
) -> list[TensorStats]:
    """What a reference pins and drift compares: every output's statistics, then every part's
    (`out:part`) and, where `per_channel` is set, every channel's (`out:part[3]`).

    `skip_unfit` leaves out parts that no longer fit their output (drift then reports them
    missing next to the output's changed shape) instead of refusing them as bad input."""
    stats = [tensor_stats(name, array) for name, array in outputs.items()]
    for part in parts:
        if part.output not in outputs:  # a missing output is reported as missing, not as a bad part
            continue
        try:
            array = slice_part(part, outputs)
        except InputError:
            if skip_unfit:
                continue
            raise
        stats.append(tensor_stats(part.key, array))
        if part.per_channel:
            stats += [
                tensor_stats(part.channel_key(index), channel, quantiles=False)
                for index, channel in part_channels(part, array)
            ]
    return stats


def part_channels(part: OutputPart, array: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(index within the part, that channel's slice) for a part's stacked slice: channel 9 of
    YOLOv8's `scores` (output channels 4:) is class 9."""
    moved = np.moveaxis(array, stacked_axis(part.axis, array.ndim - 1, part.name), 0)
    return list(enumerate(moved))


def part_statistics(part: OutputPart, outputs: Mapping[str, np.ndarray]) -> PartStatistics:
    """Min, max, mean, std of the part's finite elements, and per index along its axis if asked."""
    array = slice_part(part, outputs).astype(np.float64)
    values = _summary(array)
    channels = []
    if part.per_channel:
        moved = np.moveaxis(array, stacked_axis(part.axis, array.ndim - 1, part.name), 0)
        channels = [
            ChannelStatistics(index=part.start + offset, **_summary(channel))
            for offset, channel in enumerate(moved)
        ]
    return PartStatistics(
        output=part.output,
        name=part.name,
        shape=list(array.shape),
        nan=int(np.isnan(array).sum()),
        inf=int(np.isinf(array).sum()),
        channels=channels,
        **values,
    )


def _summary(array: np.ndarray) -> dict[str, float | None]:
    finite = array[np.isfinite(array)]
    if not finite.size:
        return {"min": None, "max": None, "mean": None, "std": None}
    return {
        "min": float(finite.min()),
        "max": float(finite.max()),
        "mean": float(finite.mean()),
        "std": float(finite.std()),
    }


def compare_part(
    part: OutputPart, golden: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray]
) -> PartComparison:
    """Cosine and absolute errors of the candidate's part against the golden one."""
    gold = slice_part(part, golden).astype(np.float64)
    cand = slice_part(part, candidate).astype(np.float64)
    if gold.shape != cand.shape:
        return PartComparison(
            output=part.output, name=part.name, shape_match=False, cosine=None, max_abs=None, mean_abs=None
        )
    difference = np.abs(cand - gold)
    channel_max_abs: list[float] = []
    if part.per_channel:
        moved = np.moveaxis(difference, stacked_axis(part.axis, difference.ndim - 1, part.name), 0)
        channel_max_abs = [float(np.max(channel)) for channel in moved.reshape(moved.shape[0], -1)]
    return PartComparison(
        output=part.output,
        name=part.name,
        shape_match=True,
        cosine=_cosine(gold, cand),
        max_abs=float(difference.max()) if difference.size else None,
        mean_abs=float(difference.mean()) if difference.size else None,
        channel_max_abs=channel_max_abs,
    )


def _cosine(golden: np.ndarray, candidate: np.ndarray) -> float | None:
    """Cosine similarity of the flattened parts; None when either has no finite length (zero, NaN)."""
    norms = math.sqrt(dot(golden, golden)) * math.sqrt(dot(candidate, candidate))
    if not math.isfinite(norms) or norms == 0.0:
        return None
    return dot(golden, candidate) / norms
