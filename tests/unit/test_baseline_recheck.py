"""BaselineTimer's re-check of a cached eager baseline, with real torch calls on the CPU (timed in this
process here; the judge's measure callables time in the task's process): a cached figure
far from what the call takes is replaced by a full measurement (and the cache with it), whatever the
machine's load, since load moves a time by less than the factors used here; every check's tolerance stays
within RECHECK_FLOOR..RECHECK_CAP; with no cached figure nothing is checked."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import torch

from evalsvc.core.results import Timings, TimingStats
from evalsvc.engine.baseline_timing import RECHECK_CAP, RECHECK_FLOOR, BaselineTimer, call_reference
from evalsvc.engine.baselines import MemoryBaselineCache
from evalsvc.engine.timing import TimingPolicy, measure

CPU = torch.device("cpu")
POLICY = TimingPolicy(budget_s=0.3, warmup_runs=1, min_runs=10)


class Relu(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    yield


def _relu(p: TimingPolicy) -> TimingStats:
    model = Relu()
    return measure(lambda *a: call_reference(model, list(a)), _inputs, CPU, p).stats


def _inputs(i: int) -> list[torch.Tensor]:
    return [torch.randn(256, 1024, generator=torch.Generator().manual_seed(i))]


def _stats(median_ms: float) -> TimingStats:
    return TimingStats(
        median_ms=median_ms,
        mean_ms=median_ms,
        iqr_ms=0.0,
        min_ms=median_ms,
        max_ms=median_ms,
        n=100,
        ci95_low_ms=median_ms * 0.995,
        ci95_high_ms=median_ms * 1.005,
        rel_ci_halfwidth=0.005,
        method="wall-clock",
    )


@pytest.fixture
def timer() -> BaselineTimer:
    return BaselineTimer(MemoryBaselineCache(), _quiet)


def test_first_measurement_is_cached_and_not_checked(timer: BaselineTimer) -> None:
    timings = Timings()
    stats = timer.eager("k", _relu, POLICY, timings)
    assert timings.eager_cached is False and timings.baseline_checks == []
    assert timer.cache.get("k") == stats and stats.n >= POLICY.min_runs


@pytest.mark.parametrize("factor", [1000.0, 0.001], ids=["cached_far_slower", "cached_far_faster"])
def test_a_cached_figure_the_call_contradicts_is_replaced(timer: BaselineTimer, factor: float) -> None:
    real = timer.eager("k", _relu, POLICY, Timings())
    wrong = _stats(real.median_ms * factor)
    timer.cache.put("k", wrong)
    timings = Timings()
    used = timer.eager("k", _relu, POLICY, timings)
    [check] = timings.baseline_checks
    assert check.kind == "eager" and check.cached_ms == wrong.median_ms and check.replaced
    assert RECHECK_FLOOR <= check.tolerance <= RECHECK_CAP
    assert timings.eager_cached is False  # what the evaluation used was measured now
    assert used != wrong and timer.cache.get("k") == used


def test_every_check_tolerance_is_bounded(timer: BaselineTimer) -> None:
    timer.eager("k", _relu, POLICY, Timings())
    timer.cache.put("k", _stats(timer.cache.get("k").median_ms))  # type: ignore[union-attr]
    checks = []
    for _ in range(3):
        timings = Timings()
        used = timer.eager("k", _relu, POLICY, timings)
        [check] = timings.baseline_checks
        checks.append(check)
        # Agreed: the cached figure is used as it is; replaced: a new one, cached.
        assert (used == timer.cache.get("k")) and (check.replaced or timings.eager_cached)
    assert all(RECHECK_FLOOR <= c.tolerance <= RECHECK_CAP for c in checks)
