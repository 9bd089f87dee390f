"""The eager and torch.compile baselines of an evaluation: taken from the fleet's cache and re-checked by
a short fresh measurement in this evaluation's conditions, measured in full when missing or when the
check disagrees (then the new figure replaces the cached one). `BaselineTimer` decides in the judge; the
measurements run in the task's process (reference_host.py), as do the helpers below."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import Any, Literal

import torch

from evalsvc.core.results import BaselineCheck, Timings, TimingStats
from evalsvc.engine.baselines import BaselineCache
from evalsvc.engine.timing import TimingPolicy, measure, rotating

# A re-check gets this share of the timing budget (1 s of the default 5 s; 0.1 s of the benches' 0.5 s).
RECHECK_SHARE = 0.2
# Cached and fresh medians may differ by twice their summed CI half-widths, and never less than this,
# before the cached figure is replaced: the milestone margin is 5%, smaller drifts do not move rewards.
RECHECK_FLOOR = 0.05
# ... and never more than this: a short check too noisy to agree within it is settled by a full measurement,
# not taken as agreement (tolerances of 1.5-7x let a cached figure stand against anything, red team 12-05).
RECHECK_CAP = 0.25

Quiet = Callable[[], contextlib.AbstractContextManager[None]]
# One measurement of a baseline under a policy, made in the task's process (reference.Reference.time);
# None when there is none (torch.compile failed, or no compiled model is held there).
Measure = Callable[[TimingPolicy], TimingStats | None]
Compile = Callable[[], bool]  # torch.compile of the reference where it is timed: whether it compiled


class BaselineTimer:
    """Thread-safe like the judge: every measurement under `quiet()` (the device alone)."""

    def __init__(self, cache: BaselineCache, quiet: Quiet) -> None:
        self.cache = cache
        self.quiet = quiet

    def eager(self, key: str, measure: Measure, policy: TimingPolicy, timings: Timings) -> TimingStats:
        cached = self.cache.get(key)
        timings.eager_cached = cached is not None
        if cached is None:
            return self._measured(key, measure, policy)
        return self._rechecked("eager", key, cached, measure, policy, timings)

    def compiled(
        self, key: str, compile_: Compile, measure: Measure, policy: TimingPolicy, timings: Timings
    ) -> TimingStats | None:
        """A cached figure is re-checked where the task's process holds the compiled model (it measured or
        re-measured it); a figure another process measured is used as it is (compiling to check it would
        cost seconds per task and process). A compile runs outside `quiet` (it is no timing)."""
        cached = self.cache.get(key)
        timings.compiled_cached = cached is not None
        if cached is not None:
            return self._rechecked("compiled", key, cached, measure, policy, timings)
        if not compile_():
            return None
        with self.quiet():
            stats = measure(policy)
        if stats is not None:
            self.cache.put(key, stats)
        return stats

    def _measured(self, key: str, measure: Measure, policy: TimingPolicy) -> TimingStats:
        with self.quiet():
            stats = measure(policy)
        if stats is None:
            raise ValueError("the eager baseline has no measurement")
        self.cache.put(key, stats)
        return stats

    def _rechecked(
        self,
        kind: Literal["eager", "compiled"],
        key: str,
        cached: TimingStats,
        measure: Measure,
        policy: TimingPolicy,
        timings: Timings,
    ) -> TimingStats:
        quick = dataclasses.replace(policy, budget_s=policy.budget_s * RECHECK_SHARE)
        with self.quiet():
            check = measure(quick)
        if check is None:  # nothing held to check with: the cached figure as it is
            return cached
        spread = 2 * (check.rel_ci_halfwidth + cached.rel_ci_halfwidth)
        tolerance = min(RECHECK_CAP, max(RECHECK_FLOOR, spread))
        replaced = abs(check.median_ms - cached.median_ms) > tolerance * cached.median_ms
        timings.baseline_checks.append(
            BaselineCheck(
                kind=kind,
                cached_ms=cached.median_ms,
                check_ms=check.median_ms,
                tolerance=tolerance,
                replaced=replaced,
            )
        )
        if not replaced:
            return cached
        if kind == "eager":
            timings.eager_cached = False
        else:
            timings.compiled_cached = False
        with self.quiet():
            stats = measure(policy)
        if stats is None:
            return cached
        self.cache.put(key, stats)
        return stats


def set_precision(tf32: bool) -> None:
    """The task's TF32 setting, for the reference, its baselines and everything timed against them."""
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def call_reference(reference: torch.nn.Module, inputs: list[Any]) -> Any:
    """One reference call as the eager baseline is timed: no autograd and, like the candidate's forward,
    no synchronisation (`measure` synchronises after its end event; one inside the call would time the
    host's wake-up too, docs/performance.md)."""
    with torch.no_grad():
        return reference(*inputs)


def _call_listed(reference: torch.nn.Module, *inputs: Any) -> Any:
    return call_reference(reference, list(inputs))


def compile_reference(
    reference: torch.nn.Module, pool: list[list[Any]], mode: str
) -> Callable[..., Any] | None:
    """torch.compile of the reference in the task's mode, compiled by a first call; None when it does not
    compile (no milestone 3 then, not a failed evaluation)."""
    try:
        compiled = torch.compile(reference, mode=None if mode == "default" else mode)
        with torch.no_grad():
            compiled(*pool[0])
    except Exception:
        return None

    def call(*a: Any) -> Any:
        with torch.no_grad():
            return compiled(*a)

    return call


def run_reference(reference: torch.nn.Module, inputs: list[Any], device: torch.device) -> Any:
    """One reference call whose output is used at once (device synchronised)."""
    out = call_reference(reference, inputs)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return out


def time_compiled(
    reference: torch.nn.Module, pool: list[list[Any]], mode: str, device: torch.device, policy: TimingPolicy
) -> TimingStats | None:
    """torch.compile of the reference timed like everything else; None when it does not compile or run."""
    call = compile_reference(reference, pool, mode)
    if call is None:
        return None
    try:
        return measure(call, rotating(pool), device, policy).stats
    except Exception:
        return None
