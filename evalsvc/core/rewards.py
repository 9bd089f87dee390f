"""Reward schedules as data: a verdict and its speedups in, a reward and a milestone out."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from evalsvc.core.results import Status, TimingStats

# A reward or threshold a tenant sets: finite and bounded, so that no stored schedule fails to load again.
Value = Annotated[float, Field(ge=-1e6, le=1e6)]
Ratio = Annotated[float, Field(gt=0, le=1e6)]
FINITE = ConfigDict(allow_inf_nan=False)


class SpeedupEvidence(BaseModel):
    """Speedups of the candidate, with their pessimistic bounds from the confidence intervals."""

    eager: float | None = None
    compile: float | None = None
    eager_low: float | None = None
    compile_low: float | None = None


class MilestoneSchedule(BaseModel):
    """CUDA Agent's default: -1 wrong, 1 correct, 2 beats eager, 3 beats eager and torch.compile."""

    model_config = FINITE
    kind: Literal["milestone"] = "milestone"
    fail: Value = -1.0
    correct: Value = 1.0
    beats_eager: Value = 2.0
    beats_both: Value = 3.0
    margin: float = Field(0.05, ge=0, le=100, description="'faster' means speedup > 1 + margin")
    require_ci: bool = Field(False, description="a 'faster' milestone needs the CI, not just the median")

    def score(self, status: Status, ev: SpeedupEvidence) -> tuple[float, int]:
        if status is not Status.OK:
            return self.fail, -1
        eager, comp = _pick(ev, self.require_ci)
        threshold = 1.0 + self.margin
        if eager is not None and eager > threshold:
            if comp is not None and comp > threshold:
                return self.beats_both, 3
            return self.beats_eager, 2
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
    require_ci: bool = False

    def score(self, status: Status, ev: SpeedupEvidence) -> tuple[float, int]:
        if status is not Status.OK:
            return self.fail, -1
        eager, _ = _pick(ev, self.require_ci)
        reward, milestone = self.correct, 1
        for i, (threshold, value) in enumerate(sorted(self.tiers)):
            if eager is not None and eager > threshold:
                reward, milestone = value, i + 2
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
    require_ci: bool = False

    def score(self, status: Status, ev: SpeedupEvidence) -> tuple[float, int]:
        if status is not Status.OK:
            return self.fail, -1
        eager, comp = _pick(ev, self.require_ci)
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


def _pick(ev: SpeedupEvidence, require_ci: bool) -> tuple[float | None, float | None]:
    if require_ci:
        return ev.eager_low, ev.compile_low
    return ev.eager, ev.compile


def speedup_evidence(
    candidate: TimingStats | None, eager: TimingStats | None, compiled: TimingStats | None
) -> SpeedupEvidence:
    """Median ratios, and pessimistic ratios (baseline CI low over candidate CI high)."""
    if candidate is None or candidate.median_ms <= 0:
        return SpeedupEvidence()

    def ratio(base: TimingStats | None) -> tuple[float | None, float | None]:
        if base is None:
            return None, None
        low = base.ci95_low_ms / candidate.ci95_high_ms if candidate.ci95_high_ms > 0 else None
        return base.median_ms / candidate.median_ms, low

    e, el = ratio(eager)
    c, cl = ratio(compiled)
    return SpeedupEvidence(eager=e, compile=c, eager_low=el, compile_low=cl)
