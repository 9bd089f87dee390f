"""Reward schedules as data: a verdict and its speedups in, a reward and a milestone out.

Every threshold is decided against the speedup's 95% interval, not its median alone: a decision is clear
when the whole interval lies on one side, uncertain when it straddles the threshold. By default
(`require_ci`) a threshold is passed only when the interval's low end clears it, so that noise around a
threshold cannot lift a reward in one process and drop it in the next; the result marks uncertain
decisions either way."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from evalsvc.core.results import Status, ThresholdDecision, TimingStats

# A reward or threshold a tenant sets: finite and bounded, so that no stored schedule fails to load again.
Value = Annotated[float, Field(ge=-1e6, le=1e6)]
Ratio = Annotated[float, Field(gt=0, le=1e6)]
FINITE = ConfigDict(allow_inf_nan=False)


class SpeedupEvidence(BaseModel):
    """Speedups of the candidate (median ratios), with the ends of their intervals."""

    eager: float | None = None
    compile: float | None = None
    eager_low: float | None = None
    compile_low: float | None = None
    eager_high: float | None = None
    compile_high: float | None = None

    def interval(self, against: Literal["eager", "compile"]) -> tuple[float, float] | None:
        low, high = (
            (self.eager_low, self.eager_high) if against == "eager" else (self.compile_low, self.compile_high)
        )
        return None if low is None or high is None else (low, high)


def decide(
    ev: SpeedupEvidence, milestone: int, against: Literal["eager", "compile"], threshold: float, by_ci: bool
) -> ThresholdDecision:
    """`threshold` against the speedup's interval; passed by its low end (`by_ci`) or by its median."""
    median = ev.eager if against == "eager" else ev.compile
    low, high = ev.interval(against) or (median, median)
    if median is None:
        return ThresholdDecision(
            milestone=milestone, against=against, threshold=threshold, passed=False, uncertain=False
        )
    uncertain = low is not None and high is not None and low <= threshold < high
    decider = low if by_ci and low is not None else median
    return ThresholdDecision(
        milestone=milestone,
        against=against,
        threshold=threshold,
        median=median,
        low=low,
        high=high,
        passed=decider > threshold,
        uncertain=uncertain,
    )


def rests_on_uncertain(decisions: list[ThresholdDecision], milestone: int) -> bool:
    """The reward of `milestone` rests on the thresholds up to the next milestone's: any uncertain there."""
    return milestone > 0 and any(d.uncertain for d in decisions if d.milestone <= milestone + 1)


class MilestoneSchedule(BaseModel):
    """CUDA Agent's default: -1 wrong, 1 correct, 2 beats eager, 3 beats eager and torch.compile."""

    model_config = FINITE
    kind: Literal["milestone"] = "milestone"
    fail: Value = -1.0
    correct: Value = 1.0
    beats_eager: Value = 2.0
    beats_both: Value = 3.0
    margin: float = Field(0.05, ge=0, le=100, description="'faster' means speedup > 1 + margin")
    require_ci: bool = Field(
        True, description="a 'faster' milestone needs the interval's low end above it, not just the median"
    )

    def decisions(self, ev: SpeedupEvidence) -> list[ThresholdDecision]:
        threshold = 1.0 + self.margin
        return [
            decide(ev, 2, "eager", threshold, self.require_ci),
            decide(ev, 3, "compile", threshold, self.require_ci),
        ]

    def score(self, status: Status, ev: SpeedupEvidence) -> tuple[float, int]:
        if status is not Status.OK:
            return self.fail, -1
        beats_eager, beats_compile = self.decisions(ev)
        if beats_eager.passed:
            return (self.beats_both, 3) if beats_compile.passed else (self.beats_eager, 2)
        return self.correct, 1


class TieredSchedule(BaseModel):
    """Rewards by speedup over eager in tiers, e.g. [(1.05, 2), (1.5, 3), (3.0, 4)]."""

    model_config = FINITE
    kind: Literal["tiered"] = "tiered"
    fail: Value = -1.0
    correct: Value = 1.0
    tiers: list[tuple[Ratio, Value]] = Field(
        default_factory=lambda: [(1.05, 2.0), (1.5, 3.0), (3.0, 4.0)], max_length=64
    )
    require_ci: bool = Field(True, description="a tier needs the interval's low end above it")

    def decisions(self, ev: SpeedupEvidence) -> list[ThresholdDecision]:
        return [decide(ev, i + 2, "eager", t, self.require_ci) for i, (t, _) in enumerate(sorted(self.tiers))]

    def score(self, status: Status, ev: SpeedupEvidence) -> tuple[float, int]:
        if status is not Status.OK:
            return self.fail, -1
        reward, milestone = self.correct, 1
        for (_, value), decision in zip(sorted(self.tiers), self.decisions(ev), strict=True):
            if decision.passed:
                reward, milestone = value, decision.milestone
        return reward, milestone


class ContinuousSchedule(BaseModel):
    """Correct solutions earn `base + scale * log(speedup)` clipped to [low, high]."""

    model_config = FINITE
    kind: Literal["continuous"] = "continuous"
    fail: Value = -1.0
    base: Value = 1.0
    scale: Value = 1.0
    low: Value = 0.0
    high: Value = 3.0
    against: Literal["eager", "compile"] = "eager"
    require_ci: bool = Field(False, description="score the interval's low end instead of the median")

    def decisions(self, ev: SpeedupEvidence) -> list[ThresholdDecision]:
        return []  # no threshold: noise moves the reward by as little as it moves the speedup

    def score(self, status: Status, ev: SpeedupEvidence) -> tuple[float, int]:
        if status is not Status.OK:
            return self.fail, -1
        eager, comp = (ev.eager_low, ev.compile_low) if self.require_ci else (ev.eager, ev.compile)
        s = eager if self.against == "eager" else comp
        if s is None or s <= 0:
            return self.base, 1
        value = min(self.high, max(self.low, self.base + self.scale * math.log(s)))
        return value, 1


RewardSchedule = Annotated[
    MilestoneSchedule | TieredSchedule | ContinuousSchedule, Field(discriminator="kind")
]

SCHEDULES: dict[str, type[BaseModel]] = {
    "milestone": MilestoneSchedule,
    "tiered": TieredSchedule,
    "continuous": ContinuousSchedule,
}


def speedup_evidence(
    candidate: TimingStats | None, eager: TimingStats | None, compiled: TimingStats | None
) -> SpeedupEvidence:
    """Median ratios, and their intervals from the two medians' 95% intervals: baseline low over candidate
    high to baseline high over candidate low (independent samples: wider than either, never narrower)."""
    if candidate is None or candidate.median_ms <= 0:
        return SpeedupEvidence()

    def ratio(base: TimingStats | None) -> tuple[float | None, float | None, float | None]:
        if base is None:
            return None, None, None
        low = base.ci95_low_ms / candidate.ci95_high_ms if candidate.ci95_high_ms > 0 else None
        high = base.ci95_high_ms / candidate.ci95_low_ms if candidate.ci95_low_ms > 0 else None
        return base.median_ms / candidate.median_ms, low, high

    e, el, eh = ratio(eager)
    c, cl, ch = ratio(compiled)
    return SpeedupEvidence(eager=e, compile=c, eager_low=el, compile_low=cl, eager_high=eh, compile_high=ch)
