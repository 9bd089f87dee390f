"""Robust summary statistics for timing samples (pure Python, shared by candidate and baselines)."""

from __future__ import annotations

import math
import statistics

from evalsvc.core.results import TimingStats


def _quantile(sorted_xs: list[float], q: float) -> float:
    if len(sorted_xs) == 1:
        return sorted_xs[0]
    pos = q * (len(sorted_xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def median_ci(sorted_xs: list[float], z: float = 1.96) -> tuple[float, float]:
    """Distribution-free 95% CI of the median from order statistics (binomial approximation)."""
    n = len(sorted_xs)
    if n < 3:
        return sorted_xs[0], sorted_xs[-1]
    half = z * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half) - 1)
    hi = min(n - 1, math.ceil(n / 2 + half))
    return sorted_xs[lo], sorted_xs[hi]


def summarize(samples_ms: list[float], method: str) -> TimingStats:
    if not samples_ms:
        raise ValueError("no timing samples")
    xs = sorted(samples_ms)
    med = statistics.median(xs)
    lo, hi = median_ci(xs)
    return TimingStats(
        median_ms=med,
        mean_ms=statistics.fmean(xs),
        iqr_ms=_quantile(xs, 0.75) - _quantile(xs, 0.25),
        min_ms=xs[0],
        max_ms=xs[-1],
        n=len(xs),
        ci95_low_ms=lo,
        ci95_high_ms=hi,
        rel_ci_halfwidth=((hi - lo) / 2 / med) if med > 0 else 0.0,
        method=method,
    )


def precise_enough(samples_ms: list[float], target_rel: float, min_n: int) -> bool:
    if len(samples_ms) < min_n:
        return False
    xs = sorted(samples_ms)
    med = statistics.median(xs)
    lo, hi = median_ci(xs)
    return med > 0 and (hi - lo) / 2 / med <= target_rel
