"""Baseline timings cached per (task, device, torch, mode, precision): a fleet measures them once (eager,
torch.compile, and eager's CUDA-graph timing shown beside small candidates).

`baseline_keys` is the one definition of the key, shared by the judge (which reads and fills the cache on
evaluation) and task vetting (which fills it ahead of any evaluation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from evalsvc.core.hashing import content_hash
from evalsvc.core.results import TimingStats
from evalsvc.core.tasks import TaskSpec


class BaselineCache(Protocol):
    def get(self, key: str) -> TimingStats | None: ...

    def put(self, key: str, stats: TimingStats) -> None: ...


class MemoryBaselineCache:
    def __init__(self) -> None:
        self._data: dict[str, TimingStats] = {}

    def get(self, key: str) -> TimingStats | None:
        return self._data.get(key)

    def put(self, key: str, stats: TimingStats) -> None:
        self._data[key] = stats

    def items(self) -> list[tuple[str, TimingStats]]:
        return list(self._data.items())


@dataclass(frozen=True)
class BaselineKeys:
    eager: str
    compiled: str
    eager_graph: str  # eager timed from CUDA-graph replays (display beside small candidates)


# In every baseline's key: when `timing.measure` changes how it times, baselines cached before are not
# comparable with candidates timed after. 2: no synchronize between the L2 flush and the start event
# (the host's launch latency no longer timed). 3: eager's calls no longer synchronise inside the timed
# region (judge.call_reference). 4: calls queued 10 at a time between synchronisations. 5: rounds of a
# random length, every call on fresh inputs, no cache flush on the CPU device. 6: warm-up until settled.
TIMING_METHOD_VERSION = 6


def baseline_keys(
    spec: TaskSpec, device_name: str, torch_version: str, timing_budget_s: float, target_rel_ci: float
) -> BaselineKeys:
    """Keys of a task's eager and torch.compile (in the task's mode) baselines on one device class."""
    meta = spec.meta
    key = content_hash(
        spec.id,
        device_name,
        torch_version,
        meta.precision.value,
        meta.tf32,
        timing_budget_s,
        target_rel_ci,
        TIMING_METHOD_VERSION,
    )
    return BaselineKeys(
        eager="eager:" + key, compiled=f"compile:{meta.compile_mode}:{key}", eager_graph="eager-graph:" + key
    )
