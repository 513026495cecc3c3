"""Per-part results: statistics and element-wise agreement of a named slice of an output (see
`baseline.models.task.OutputPart`), the numbers whole-tensor comparisons mix across parts."""

from __future__ import annotations

from baseline.models.base import Record


class ChannelStatistics(Record):
    index: int
    min: float | None
    max: float | None
    mean: float | None
    std: float | None


class PartStatistics(Record):
    """Statistics of one named part over all samples (finite elements only), optionally per channel."""

    output: str
    name: str
    shape: list[int]
    min: float | None
    max: float | None
    mean: float | None
    std: float | None
    nan: int
    inf: int
    channels: list[ChannelStatistics] = []


class PartComparison(Record):
    """Element-wise agreement of one part: the numbers whole-tensor comparisons mix across parts."""

    output: str
    name: str
    shape_match: bool
    cosine: float | None
    max_abs: float | None
    mean_abs: float | None
    channel_max_abs: list[float] = []
    """Per index along the part's axis, when `per_channel` is set."""
