"""Descriptions of tensors: declared specs, measured statistics and comparisons."""

from __future__ import annotations

from baseline.models.base import Record

Dim = int | str
"""A dimension: a fixed size, or the name of a symbolic dimension (`"N"`, `"?"` if unnamed)."""


class TensorSpec(Record):
    """A graph input or output as the model declares it."""

    name: str
    dtype: str
    shape: list[Dim]

    @property
    def is_static(self) -> bool:
        return all(isinstance(dim, int) for dim in self.shape)


class TensorStats(Record):
    """Summary statistics of one output tensor over all fixture samples.

    The float statistics cover finite elements only; they are `None` when a tensor has
    no finite element at all (all NaN / Inf), which the counts then explain.
    """

    name: str
    dtype: str
    shape: list[int]
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    std: float | None = None
    p01: float | None = None
    p50: float | None = None
    p99: float | None = None
    nan: int
    inf: int
    quantiles: list[float] = []
    """Finite values at 0, 5, 10, ..., 100 % (21 points): the distribution, for plots."""


STAT_FIELDS: tuple[str, ...] = ("min", "max", "mean", "std", "p01", "p50", "p99")
"""The float statistics the drift gate compares, in display order."""


class TensorComparison(Record):
    """Element-wise agreement of a candidate tensor with a golden one (numbers only)."""

    name: str
    shape_match: bool
    candidate_shape: list[int]
    golden_shape: list[int]
    cosine: float | None
    max_abs: float | None
    mean_abs: float | None
    max_rel: float | None
    """Over elements with |golden| > atol only (None when there are none): near zero, relative
    error is noise."""
    mean_rel: float | None
    mismatches: int
    total: int
    atol: float
    rtol: float
    candidate_nan: int
    candidate_inf: int
    golden_nan: int
    golden_inf: int

    @property
    def mismatch_ratio(self) -> float:
        return self.mismatches / self.total if self.total else 0.0
