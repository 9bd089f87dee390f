"""Per-evaluation options, shared by the CLI, the HTTP API and the queue."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from evalsvc.core.rewards import MilestoneSchedule, RewardSchedule


class EvalOptions(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False)  # stored and re-read by every stage: refused at the door
    trials: int | None = Field(None, ge=1, le=50, description="correctness trials (default: the task's)")
    schedule: RewardSchedule = Field(default_factory=MilestoneSchedule)
    compile_baseline: bool = Field(True, description="also time torch.compile of the reference")
    timing_budget_s: float = Field(5.0, gt=0, le=120, description="time budget per timed subject")
    target_rel_ci: float = Field(0.01, gt=0, le=0.5)
    timing_pool: int = Field(
        4,
        ge=1,
        le=16,
        description="input sets the runner must reproduce from their seeds (every timed call gets inputs "
        "of its own, made from a fresh seed)",
    )
    profile: bool = Field(
        False,
        description="after the timed runs: a profiler trace of the candidate and, where enabled, Nsight "
        "Compute metrics of its top kernels (display only; docs/profiling.md)",
    )
    max_speedup: float = Field(
        100.0, gt=1, le=1e6, description="speedups over eager past this are flagged for review, not rewarded"
    )
