"""Tensor statistics and tensor comparisons. Numbers only; renderers make text of them."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from baseline.models.tensors import STAT_FIELDS, TensorComparison, TensorStats
from baseline.models.tolerances import DriftTolerance

PERCENTILES = (1.0, 50.0, 99.0)
QUANTILE_STEPS = tuple(float(q) for q in range(0, 101, 5))
REL_FLOOR = 1e-12
"""Relative error covers elements with `|golden| > max(atol, REL_FLOOR)` only."""


def tensor_stats(name: str, array: np.ndarray, quantiles: bool = True) -> TensorStats:
    """Statistics over all elements of `array` (all samples); floats over finite elements.

    `quantiles=False` leaves out the 21-point distribution (kept for outputs and parts, which
    reports plot; per-channel entries would only make the lock long)."""
    data = np.asarray(array).astype(np.float64, copy=False).ravel()
    finite_mask = np.isfinite(data)
    every = bool(finite_mask.all())  # the usual case: no copy of the finite elements, no counting
    finite = data if every else data[finite_mask]
    values: dict[str, float | None] = dict.fromkeys(STAT_FIELDS)
    distribution: list[float] = []
    if finite.size:
        # one call: numpy partitions the data once for all the points asked
        points = np.percentile(finite, PERCENTILES + (QUANTILE_STEPS if quantiles else ()))
        p01, p50, p99 = points[: len(PERCENTILES)]
        distribution = [float(q) for q in points[len(PERCENTILES) :]]
        values = {
            "min": float(finite.min()),
            "max": float(finite.max()),
            "mean": float(finite.mean()),
            "std": float(finite.std()),
            "p01": float(p01),
            "p50": float(p50),
            "p99": float(p99),
        }
    return TensorStats(
        name=name,
        dtype=str(array.dtype),
        shape=list(array.shape),
        nan=0 if every else int(np.isnan(data).sum()),
        inf=0 if every else int(np.isinf(data).sum()),
        quantiles=distribution,
        **values,
    )


def warm_up() -> None:
    """Statistics and a comparison of a few numbers: numpy imports part of what they use on first
    call (`np.percentile` imports `numpy.ma`: ~0.025 s). A cold verify runs this while the
    helper computes its first job (`baseline.runtime.isolated.while_waiting`)."""
    numbers = np.linspace(-1.0, 1.0, 8, dtype=np.float32)
    tensor_stats("warm-up", numbers)
    compare_tensors("warm-up", numbers, numbers, 1e-4, 1e-3)


def compare_tensors(
    name: str, candidate: np.ndarray, golden: np.ndarray, atol: float, rtol: float
) -> TensorComparison:
    """Element-wise agreement of `candidate` with `golden` (NaN matches NaN in place)."""
    cand = np.asarray(candidate).astype(np.float64, copy=False)
    gold = np.asarray(golden).astype(np.float64, copy=False)
    counts = {
        "candidate_nan": int(np.isnan(cand).sum()),
        "candidate_inf": int(np.isinf(cand).sum()),
        "golden_nan": int(np.isnan(gold).sum()),
        "golden_inf": int(np.isinf(gold).sum()),
    }
    common = {
        "name": name,
        "candidate_shape": list(cand.shape),
        "golden_shape": list(gold.shape),
        "atol": atol,
        "rtol": rtol,
        **counts,
    }
    if cand.shape != gold.shape:
        total = max(cand.size, gold.size)
        return TensorComparison(
            shape_match=False,
            cosine=None,
            max_abs=None,
            mean_abs=None,
            max_rel=None,
            mean_rel=None,
            mismatches=total,
            total=total,
            **common,
        )
    return TensorComparison(shape_match=True, **_elementwise(cand, gold, atol, rtol), **common)


def _elementwise(cand: np.ndarray, gold: np.ndarray, atol: float, rtol: float) -> dict[str, object]:
    both_finite = np.isfinite(cand) & np.isfinite(gold)
    if both_finite.all():
        return _finite_elementwise(cand.ravel(), gold.ravel(), atol, rtol)
    close = np.isclose(cand, gold, rtol=rtol, atol=atol, equal_nan=True)
    c, g = cand[both_finite], gold[both_finite]
    diff = np.abs(c - g)
    # relative error means something only where the expected value is not near zero: a score
    # of 1e-9 that became 1e-4 is "1e5 × off" and tells nobody anything
    sizeable = np.abs(g) > max(atol, REL_FLOOR)
    rel = diff[sizeable] / np.abs(g[sizeable])
    return _agreement(c, g, diff, rel, int(close.size - np.count_nonzero(close)), int(close.size))


def _finite_elementwise(c: np.ndarray, g: np.ndarray, atol: float, rtol: float) -> dict[str, object]:
    """`_elementwise` for the usual outputs, every element finite: the same numbers from fewer
    temporaries (each a fresh 2 MB for a 262,720-element output; a cold verify's first
    comparison paid ~10 ms in page faults). For finite values `np.isclose` is exactly
    `|c - g| <= atol + rtol * |g|`."""
    diff = np.subtract(c, g)
    np.abs(diff, out=diff)
    magnitude = np.abs(g)
    sizeable = magnitude > max(atol, REL_FLOOR)
    rel = diff / magnitude if sizeable.all() else diff[sizeable] / magnitude[sizeable]
    bound = np.multiply(magnitude, rtol, out=magnitude)
    bound += atol
    close = np.count_nonzero(diff <= bound)
    return _agreement(c, g, diff, rel, int(diff.size - close), int(diff.size))


def _agreement(
    c: np.ndarray, g: np.ndarray, diff: np.ndarray, rel: np.ndarray, mismatches: int, total: int
) -> dict[str, object]:
    has = diff.size > 0
    return {
        "cosine": cosine_similarity(c, g) if has else None,
        "max_abs": float(diff.max()) if has else None,
        "mean_abs": float(diff.mean()) if has else None,
        "max_rel": float(rel.max()) if rel.size else None,
        "mean_rel": float(rel.mean()) if rel.size else None,
        "mismatches": mismatches,
        "total": total,
    }


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine of the angle between two flattened tensors; two zero tensors are identical (1.0)."""
    a, b = a.ravel(), b.ravel()
    norm = math.sqrt(dot(a, a)) * math.sqrt(dot(b, b))
    if norm == 0.0:
        return 1.0 if not a.any() and not b.any() else 0.0
    return float(np.clip(dot(a, b) / norm, -1.0, 1.0))


def dot(a: np.ndarray, b: np.ndarray) -> float:
    """The sum of `a * b` over the flattened float64 arrays, on this thread. Not `np.dot` or
    `np.linalg.norm`: they call OpenBLAS, which splits a long sum over every core, so the last
    bits of a cosine depended on the machine's core count, and waking those threads while the
    other core was busy took 0.4-18 ms for 262,720 elements in a cold verify (0.1 ms here)."""
    return float(np.einsum("i,i->", a.ravel(), b.ravel()))


@dataclass(frozen=True)
class StatDelta:
    """How far one statistic moved, against what the tolerance allows."""

    statistic: str
    baseline: float | None
    candidate: float | None
    allowed: float

    @property
    def ratio(self) -> float:
        """|Δ| / allowed: above 1 means out of tolerance; inf when a value appeared or vanished."""
        if self.baseline is None or self.candidate is None:
            return 0.0 if self.baseline is self.candidate else math.inf
        delta = abs(self.candidate - self.baseline)
        if self.allowed == 0.0:
            return 0.0 if delta == 0.0 else math.inf
        return delta / self.allowed

    @property
    def exceeded(self) -> bool:
        return self.ratio > 1.0


def stat_deltas(
    baseline: TensorStats,
    candidate: TensorStats,
    tolerance: DriftTolerance,
    slack: dict[str, float] | None = None,
) -> list[StatDelta]:
    """Every float statistic of `candidate` against `baseline`, allowed `atol + rtol·|baseline|`
    plus that statistic's `slack` (a quantized build's own distance from the float model)."""
    deltas = []
    for field in STAT_FIELDS:
        old = getattr(baseline, field)
        allowed = tolerance.atol + tolerance.rtol * abs(old) if old is not None else tolerance.atol
        allowed += (slack or {}).get(field, 0.0)
        deltas.append(StatDelta(field, old, getattr(candidate, field), allowed))
    return deltas
