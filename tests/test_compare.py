from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest

from baseline.compare import compare_tensors, cosine_similarity, stat_deltas, tensor_stats
from baseline.gates.consistency import _failures, below_resolution
from baseline.models.tolerances import ConsistencyTolerance, DriftTolerance


def test_stats_cover_finite_values_and_count_the_rest() -> None:
    array = np.array([1.0, 2.0, 3.0, np.nan, np.inf, -np.inf], dtype=np.float32)
    stats = tensor_stats("y", array)
    assert (stats.min, stats.max, stats.mean) == (1.0, 3.0, 2.0)
    assert stats.nan == 1 and stats.inf == 2
    assert stats.p50 == 2.0 and stats.shape == [6] and stats.dtype == "float32"


def test_percentiles_and_the_distribution_are_numpys() -> None:
    """Both come from one `np.percentile` call: the values a lock holds must not move."""
    data = np.random.default_rng(7).standard_normal((4, 3, 101)).astype(np.float32)
    stats = tensor_stats("y", data)
    flat = data.astype(np.float64).ravel()
    assert [stats.p01, stats.p50, stats.p99] == np.percentile(flat, [1.0, 50.0, 99.0]).tolist()
    assert stats.quantiles == np.percentile(flat, list(range(0, 101, 5))).tolist()
    assert tensor_stats("y", data, quantiles=False).quantiles == []


def test_all_nan_tensor_has_no_float_stats() -> None:
    stats = tensor_stats("y", np.full(4, np.nan))
    assert stats.mean is None and stats.nan == 4


def test_identical_tensors_compare_perfectly() -> None:
    a = np.linspace(-1, 1, 100, dtype=np.float32)
    c = compare_tensors("y", a, a.copy(), atol=0, rtol=0)
    assert c.cosine == pytest.approx(1.0) and c.max_abs == 0 and c.mismatches == 0


def test_comparison_numbers() -> None:
    golden = np.array([1.0, 2.0, 4.0, 0.0])
    candidate = np.array([1.0, 2.5, 4.0, 0.1])
    c = compare_tensors("y", candidate, golden, atol=0.01, rtol=0.01)
    assert c.max_abs == pytest.approx(0.5)
    assert c.mean_abs == pytest.approx(0.15)
    assert c.max_rel == pytest.approx(0.25)  # the zero golden is left out of relative error
    assert c.mismatches == 2 and c.total == 4 and c.mismatch_ratio == 0.5


def test_relative_error_only_where_expected_values_are_not_near_zero() -> None:
    golden = np.array([1e-9, 1e-4, 2.0])
    candidate = np.array([1e-4, 2e-4, 2.2])
    c = compare_tensors("y", candidate, golden, atol=5e-3, rtol=1e-2)
    assert c.max_rel == pytest.approx(0.1) and c.mean_rel == pytest.approx(0.1)
    near_zero = compare_tensors("y", candidate[:2], golden[:2], atol=5e-3, rtol=1e-2)
    assert near_zero.max_rel is None and near_zero.max_abs == pytest.approx(1e-4, rel=1e-3)


def test_shape_mismatch_is_reported_not_raised() -> None:
    c = compare_tensors("y", np.zeros((2, 3)), np.zeros((3, 2)), atol=0, rtol=0)
    assert not c.shape_match and c.cosine is None and c.mismatches == 6


def test_nan_in_candidate_counts_as_mismatch_unless_golden_has_it_too() -> None:
    golden = np.array([1.0, np.nan])
    assert compare_tensors("y", np.array([np.nan, np.nan]), golden, 0, 0).mismatches == 1
    assert compare_tensors("y", np.array([1.0, np.nan]), golden, 0, 0).mismatches == 0


def test_cosine_edge_cases() -> None:
    assert cosine_similarity(np.zeros(3), np.zeros(3)) == 1.0
    assert cosine_similarity(np.zeros(3), np.ones(3)) == 0.0
    assert cosine_similarity(np.array([1.0, 0]), np.array([-1.0, 0])) == -1.0


_COSINE_SCRIPT = """
import numpy as np
from baseline.compare import cosine_similarity, dot
rng = np.random.default_rng(1)
a, b = rng.standard_normal(1_000_000), rng.standard_normal(1_000_000)
print(repr(dot(a, b)), repr(cosine_similarity(a, a + b)))
"""


def test_cosine_does_not_depend_on_the_machines_cores() -> None:
    """A cosine in a report or cached result is the same on a 2-core CI runner and a 16-core
    laptop: numpy's BLAS `dot` splits a long sum by thread count (its last bits then differ)."""
    sums = {
        subprocess.run(
            [sys.executable, "-c", _COSINE_SCRIPT],
            env={**os.environ, "OPENBLAS_NUM_THREADS": threads, "OMP_NUM_THREADS": threads},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for threads in ("1", "2", "4")
    }
    assert len(sums) == 1, sums
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(1_000_000), rng.standard_normal(1_000_000)
    assert float(sums.pop().split()[0]) == pytest.approx(math.fsum(a * b), rel=1e-12)


def test_stat_deltas_against_tolerance() -> None:
    base = tensor_stats("y", np.array([0.0, 1.0, 2.0]))
    moved = tensor_stats("y", np.array([0.0, 1.0, 2.1]))
    deltas = {d.statistic: d for d in stat_deltas(base, moved, DriftTolerance(atol=0.0, rtol=0.01))}
    assert deltas["max"].exceeded and deltas["max"].ratio == pytest.approx(0.1 / 0.02)
    assert not deltas["min"].exceeded and deltas["min"].ratio == 0.0
    vanished = tensor_stats("y", np.array([np.nan]))
    assert math.isinf({d.statistic: d for d in stat_deltas(base, vanished, DriftTolerance())}["mean"].ratio)


def _plain_comparison(cand: np.ndarray, gold: np.ndarray, atol: float, rtol: float) -> dict[str, object]:
    """The comparison's definition, written plainly: what the fast paths must equal bit for bit."""
    c64, g64 = cand.astype(np.float64), gold.astype(np.float64)
    close = np.isclose(c64, g64, rtol=rtol, atol=atol, equal_nan=True)
    finite = np.isfinite(c64) & np.isfinite(g64)
    c, g = c64[finite], g64[finite]
    diff = np.abs(c - g)
    sizeable = np.abs(g) > max(atol, 1e-12)
    rel = diff[sizeable] / np.abs(g[sizeable])
    return {
        "cosine": cosine_similarity(c, g) if diff.size else None,
        "max_abs": float(diff.max()) if diff.size else None,
        "mean_abs": float(diff.mean()) if diff.size else None,
        "max_rel": float(rel.max()) if rel.size else None,
        "mean_rel": float(rel.mean()) if rel.size else None,
        "mismatches": int(close.size - np.count_nonzero(close)),
        "candidate_nan": int(np.isnan(c64).sum()),
        "golden_inf": int(np.isinf(g64).sum()),
    }


def _same(a: object, b: object) -> bool:
    """Equal, bit for bit, where NaN equals NaN."""
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def _arrays(rng: np.random.Generator, case: int) -> tuple[np.ndarray, np.ndarray]:
    shape = [(3, 40, 7), (1, 0, 5), (64,), (2, 300)][case % 4]
    gold = rng.standard_normal(shape).astype([np.float32, np.float64, np.float16][case % 3])
    cand = (gold + rng.normal(0, [0.0, 1e-4, 1e-2][case % 3], shape)).astype(gold.dtype)
    if case % 5 == 1:
        gold.flat[::7] = 0.0  # near-zero golden values: outside the relative error
    if case % 5 == 2 and cand.size:
        cand.flat[::11], gold.flat[::13] = np.nan, np.inf
    if case % 4 == 3:
        cand, gold = np.asfortranarray(cand), gold[:, ::-1]  # other layouts than C order
    return cand, gold


@pytest.mark.parametrize("case", range(30))
def test_comparisons_and_statistics_equal_their_plain_definitions(case: int) -> None:
    rng = np.random.default_rng(case)
    cand, gold = _arrays(rng, case)
    atol, rtol = [(1e-4, 1e-3), (0.0, 0.0), (1e-2, 0.0)][case % 3]
    fast = compare_tensors("y", cand, gold, atol, rtol).model_dump()
    plain = _plain_comparison(cand, gold, atol, rtol)
    differing = {key: (fast[key], want) for key, want in plain.items() if not _same(fast[key], want)}
    assert not differing
    data = cand.astype(np.float64).ravel()
    finite = data[np.isfinite(data)]
    stats = tensor_stats("y", cand)
    assert (stats.nan, stats.inf) == (int(np.isnan(data).sum()), int(np.isinf(data).sum()))
    if finite.size:
        points = np.percentile(finite, [1, 50, 99])
        expected = [finite.min(), finite.max(), finite.mean(), finite.std(), *points]
        assert [stats.min, stats.max, stats.mean, stats.std, stats.p01, stats.p50, stats.p99] == expected


def test_a_cosine_below_the_comparisons_resolution_is_not_judged() -> None:
    """A class channel whose scores sit near 0: within atol everywhere, its cosine is the direction
    of noise; one element beyond atol and the cosine counts again."""
    rng = np.random.default_rng(0)
    golden = np.full(400, 1e-5)
    candidate = golden + rng.normal(0, 3e-5, 400)
    tail = compare_tensors("scores[3]", candidate, golden, 5e-3, 1e-2)
    assert tail.cosine is not None and tail.cosine < 0.9 and below_resolution(tail.max_rel, tail.mismatches)
    assert _failures("channel", tail, ConsistencyTolerance()) == []
    golden[0], candidate[0] = 0.5, -0.5
    flipped = compare_tensors("scores[3]", candidate, golden, 5e-3, 1e-2)
    assert not below_resolution(flipped.max_rel, flipped.mismatches)
    assert any("cosine" in line for line in _failures("channel", flipped, ConsistencyTolerance()))
