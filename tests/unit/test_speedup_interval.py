"""Speedup intervals and the uncertain rule, on real timing samples (tests/unit/data/timing_samples_cpu.json:
`evalsvc.engine.timing.measure` on this CPU, recorded once; the file says how)."""

import json
import random
from pathlib import Path

import pytest

from evalsvc.core.results import Status, TimingStats
from evalsvc.core.rewards import (
    MilestoneSchedule,
    TieredSchedule,
    decide,
    rests_on_uncertain,
    speedup_evidence,
)
from evalsvc.core.stats import summarize

SAMPLES = json.loads((Path(__file__).parent / "data" / "timing_samples_cpu.json").read_text())["samples_ms"]


def stats(name: str) -> TimingStats:
    return summarize(SAMPLES[name], "test")


def test_interval_is_baseline_ci_over_candidate_ci_and_holds_the_median() -> None:
    base, cand = stats("relu_1M"), stats("relu_512K")
    ev = speedup_evidence(cand, base, None)
    low, high = ev.interval("eager") or (0.0, 0.0)
    assert low == pytest.approx(base.ci95_low_ms / cand.ci95_high_ms)
    assert high == pytest.approx(base.ci95_high_ms / cand.ci95_low_ms)
    assert ev.eager is not None and low <= ev.eager <= high
    assert ev.interval("compile") is None


def test_a_kernel_against_itself_is_not_faster_and_a_halved_one_clearly_is() -> None:
    same = speedup_evidence(stats("relu_1M_again"), stats("relu_1M"), stats("relu_1M"))
    beats_eager, _beats_compile = MilestoneSchedule().decisions(same)
    assert not beats_eager.passed and not beats_eager.uncertain  # the interval lies under 1.05
    assert MilestoneSchedule().score(Status.OK, same) == (1.0, 1)
    half = speedup_evidence(stats("relu_512K"), stats("relu_1M"), stats("gelu_1M"))
    decisions = MilestoneSchedule().decisions(half)
    assert all(d.passed and not d.uncertain for d in decisions)
    assert MilestoneSchedule().score(Status.OK, half) == (3.0, 3)
    assert not rests_on_uncertain(decisions, 3)


def test_a_threshold_inside_the_interval_is_uncertain_and_not_passed_by_default() -> None:
    ev = speedup_evidence(stats("relu_1M_again"), stats("relu_1M"), None)
    assert ev.eager is not None and ev.eager_low is not None and ev.eager_high is not None
    threshold = (ev.eager_low + ev.eager) / 2  # under the median, over the low end
    by_ci = decide(ev, 2, "eager", threshold, by_ci=True)
    by_median = decide(ev, 2, "eager", threshold, by_ci=False)
    assert by_ci.uncertain and by_median.uncertain
    assert not by_ci.passed and by_median.passed
    assert rests_on_uncertain([by_ci], 1)
    assert not decide(ev, 2, "eager", ev.eager_high * 1.01, by_ci=True).uncertain
    assert not decide(ev, 2, "eager", ev.eager_low * 0.99, by_ci=True).uncertain


def test_tiers_are_decided_on_the_interval() -> None:
    ev = speedup_evidence(stats("relu_512K"), stats("relu_1M"), None)
    assert ev.eager is not None and ev.eager_low is not None
    tiers = [(1.05, 2.0), (ev.eager, 3.0), (100.0, 4.0)]  # the middle tier sits on the median
    decisions = TieredSchedule(tiers=tiers).decisions(ev)
    assert [d.uncertain for d in decisions] == [False, True, False]
    assert TieredSchedule(tiers=tiers).score(Status.OK, ev) == (2.0, 2)
    assert TieredSchedule(tiers=tiers, require_ci=False).score(Status.OK, ev) == (2.0, 2)  # median not above


def test_halves_of_the_same_samples_never_disagree_on_a_clear_decision() -> None:
    """Two processes measuring the same kernels see different halves of one population: wherever their
    decisions differ, one of them is marked uncertain."""
    rng = random.Random(7)
    base, cand = SAMPLES["relu_1M"], SAMPLES["relu_1M_again"]
    schedule = MilestoneSchedule()
    median = speedup_evidence(stats("relu_1M_again"), stats("relu_1M"), None).eager
    assert median is not None
    flips = 0
    for _ in range(200):
        halves = []
        for _ in range(2):
            b = rng.sample(base, len(base) // 2)
            c = rng.sample(cand, len(cand) // 2)
            halves.append(speedup_evidence(summarize(c, "t"), summarize(b, "t"), None))
        for threshold in (median * 0.97, median * 0.99, median, median * 1.01, median * 1.03):
            a, b2 = (decide(ev, 2, "eager", threshold, schedule.require_ci) for ev in halves)
            if a.passed != b2.passed:
                flips += 1
                assert a.uncertain or b2.uncertain
    assert flips > 0  # the thresholds near the median do make halves disagree: the check was exercised
