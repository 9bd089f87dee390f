from evalsvc.core.results import Status, TimingStats
from evalsvc.core.rewards import ContinuousSchedule, MilestoneSchedule, TieredSchedule, speedup_evidence


def stats(median: float, rel: float = 0.001) -> TimingStats:
    return TimingStats(
        median_ms=median,
        mean_ms=median,
        iqr_ms=0,
        min_ms=median,
        max_ms=median,
        n=20,
        ci95_low_ms=median * (1 - rel),
        ci95_high_ms=median * (1 + rel),
        rel_ci_halfwidth=rel,
        method="test",
    )


def test_milestones_follow_cuda_agent() -> None:
    s = MilestoneSchedule()
    assert s.score(Status.INCORRECT, speedup_evidence(None, None, None)) == (-1.0, -1)
    assert s.score(Status.OK, speedup_evidence(stats(1.0), stats(1.0), stats(1.0))) == (1.0, 1)
    assert s.score(Status.OK, speedup_evidence(stats(1.0), stats(1.04), stats(0.5))) == (1.0, 1)
    assert s.score(Status.OK, speedup_evidence(stats(1.0), stats(1.06), stats(0.5))) == (2.0, 2)
    assert s.score(Status.OK, speedup_evidence(stats(1.0), stats(2.0), stats(1.06))) == (3.0, 3)
    assert s.score(Status.OK, speedup_evidence(stats(1.0), stats(2.0), None)) == (2.0, 2)


def test_the_interval_decides_by_default_and_the_median_on_request() -> None:
    noisy = speedup_evidence(stats(1.0, rel=0.2), stats(1.1, rel=0.2), stats(1.1, rel=0.2))
    assert MilestoneSchedule().score(Status.OK, noisy)[1] == 1
    assert MilestoneSchedule(require_ci=False).score(Status.OK, noisy)[1] == 3
    assert all(d.uncertain for d in MilestoneSchedule().decisions(noisy))


def test_tiered_and_continuous() -> None:
    ev = speedup_evidence(stats(1.0), stats(2.0), stats(1.0))
    assert TieredSchedule().score(Status.OK, ev) == (3.0, 3)
    r, m = ContinuousSchedule().score(Status.OK, ev)
    assert 1.6 < r < 1.8 and m == 1
    assert ContinuousSchedule().score(Status.TIMEOUT, ev)[0] == -1.0
