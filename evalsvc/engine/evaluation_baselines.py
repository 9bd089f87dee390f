"""An evaluation's baselines: eager and torch.compile timed by the candidate's method in the task's process
(from the fleet's cache and re-checked, or measured: baseline_timing.py), and eager's CUDA-graph timing
shown beside a small candidate's."""

from __future__ import annotations

import random
import time
from functools import partial
from typing import Any

import torch

from evalsvc.core.options import EvalOptions
from evalsvc.core.results import Timings, TimingStats
from evalsvc.core.tasks import TaskSpec
from evalsvc.engine.baseline_timing import BaselineTimer, Quiet
from evalsvc.engine.baselines import BaselineCache, BaselineKeys, baseline_keys
from evalsvc.engine.device_info import device_name
from evalsvc.engine.reference import Reference, ReferenceFailed
from evalsvc.engine.timing import TimingPolicy


class EvaluationBaselines:
    """Thread-safe like the judge: every measurement under `quiet()` (the device alone)."""

    def __init__(self, cache: BaselineCache, device: torch.device, quiet: Quiet) -> None:
        self.cache = cache
        self.device = device
        self.timer = BaselineTimer(cache, quiet)

    def keys(self, task: TaskSpec, options: EvalOptions) -> BaselineKeys:
        budget, ci = options.timing_budget_s, options.target_rel_ci
        return baseline_keys(task, device_name(self.device), torch.__version__, budget, ci)

    def measure(
        self,
        ref: Reference,
        probe_seeds: list[int],
        options: EvalOptions,
        policy: TimingPolicy,
        timings: Timings,
        rng: random.Random,
    ) -> None:
        """Eager and torch.compile baselines by the candidate's method (rounds of calls on fresh inputs),
        measured in the task's process: from the cache and re-checked, or measured; `timings` says which
        and how long it took."""
        meta = ref.spec.meta
        keys = self.keys(ref.spec, options)
        started = time.monotonic()

        def eager(p: TimingPolicy) -> TimingStats | None:
            return ref.time("eager", p, rng.getrandbits(62))

        def compiled(p: TimingPolicy) -> TimingStats | None:
            return ref.time("compiled", p, rng.getrandbits(62), meta.compile_mode)

        timings.eager = self.timer.eager(keys.eager, eager, policy, timings)
        if options.compile_baseline:
            timings.compile_mode = meta.compile_mode
            compile_ = partial(ref.compile, meta.compile_mode, probe_seeds)
            timings.compiled = self.timer.compiled(keys.compiled, compile_, compiled, policy, timings)
        timings.baseline_cached = timings.eager_cached and (
            timings.compiled_cached or not options.compile_baseline
        )
        timings.baselines_measured_s = time.monotonic() - started

    def eager_graph(self, ref: Reference, inputs: list[Any], options: EvalOptions, timings: Timings) -> None:
        """Eager's launch-overhead-free timing from CUDA-graph replays (cached like the baselines), shown
        beside a small candidate's; none when the task's process cannot give it."""
        key = self.keys(ref.spec, options).eager_graph
        timings.eager_graph = self.cache.get(key)
        if timings.eager_graph is None:
            try:
                timings.eager_graph = ref.time_graph(inputs)
            except ReferenceFailed:
                return
            if timings.eager_graph is not None:
                self.cache.put(key, timings.eager_graph)
