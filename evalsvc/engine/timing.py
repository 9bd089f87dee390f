"""One timing method for candidate and baselines alike: fresh input values each call, caches flushed,
device-wide synchronisation, adaptive repetition until the median is known to a target precision."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from evalsvc.core.results import TimingStats
from evalsvc.core.stats import precise_enough, summarize


@dataclass(frozen=True)
class TimingPolicy:
    warmup_runs: int = 3
    min_runs: int = 10
    max_runs: int = 2000
    target_rel_ci: float = 0.01
    budget_s: float = 5.0
    flush_bytes: int = 256 * 1024 * 1024
    # Queued calls keep the GPU busy back to back, as a kernel runs in a real model: on the H200 a 43 µs
    # ReLU read 1.9% under do_bench queued 10 at a time, 3.3% synchronised after every call; a 2.7 ms
    # matmul 0.03% and +3.2% (bench/timing_method.py, run 11).
    calls_per_sync: int = 10


@dataclass
class Measurement:
    stats: TimingStats
    last_output: Any
    last_index: int
    wall_s: float
    samples_ms: list[float]  # in the order taken


def _copy_into(staging: Sequence[Any], source: Sequence[Any]) -> None:
    for dst, src in zip(staging, source, strict=True):
        if isinstance(dst, torch.Tensor):
            dst.copy_(src)


def measure(
    fn: Callable[..., Any], pool: Sequence[Sequence[Any]], device: torch.device, policy: TimingPolicy
) -> Measurement:
    """Time `fn(*inputs)`; before each call the staging inputs get the next pool set's values.

    Values change every call at fixed addresses, so caching by pointer returns stale results (caught by
    checking the last output) and caching by value must read every input first. On a GPU,
    `policy.calls_per_sync` calls are queued between device-wide synchronisations.
    """
    cuda = device.type == "cuda"
    staging = [a.clone() if isinstance(a, torch.Tensor) else a for a in pool[0]]
    flush = torch.empty(
        policy.flush_bytes // 4 if cuda else policy.flush_bytes // 16, dtype=torch.float32, device=device
    )
    perf = time.perf_counter
    samples: list[float] = []
    out: Any = None
    idx = 0
    start_wall = perf()
    deadline = start_wall + policy.budget_s
    i = 0
    queued = max(1, policy.calls_per_sync) if cuda else 1
    while True:
        pending: list[tuple[int, Any, Any]] = []
        for _ in range(queued if i >= policy.warmup_runs else policy.warmup_runs):
            idx = i % len(pool)
            _copy_into(staging, pool[idx])
            flush.fill_(float(i))
            if cuda:
                # No synchronize between the flush and `begin`: the GPU is still flushing (~60 µs for
                # 256 MB on an H200) while the CPU records `begin` and launches the call, so the first
                # kernel starts right after `begin` instead of after the host's launch latency (tens of
                # µs). As triton's do_bench times; host work between the call's kernels is still counted.
                begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                begin.record()
                out = fn(*staging)
                end.record()
                pending.append((i, begin, end))
            else:
                t0 = perf()
                out = fn(*staging)
                pending.append((i, t0, perf()))
            i += 1
        if cuda:
            torch.cuda.synchronize()
        for j, begin, end in pending:
            if j >= policy.warmup_runs:
                samples.append(begin.elapsed_time(end) if cuda else (end - begin) * 1e3)
        if len(samples) >= policy.max_runs or (samples and perf() > deadline):
            break
        if precise_enough(samples, policy.target_rel_ci, policy.min_runs):
            break
    method = "cuda-events+l2-flush+fresh-values" if cuda else "wall-clock+cache-flush+fresh-values"
    return Measurement(summarize(samples, method), out, idx, perf() - start_wall, samples)


def measure_graph(
    fn: Callable[..., Any],
    inputs: Sequence[Any],
    device: torch.device,
    calls: int = 20,
    rounds: int = 10,
    flush_bytes: int = 256 * 1024 * 1024,
) -> TimingStats:
    """Device time per call without the CPU's launch overhead, for kernels of a few microseconds.

    `calls` calls, each after an L2 flush, are captured in one CUDA graph; a second graph holds the
    flushes alone; per call = (replay of the first - replay of the second) / calls. The input values
    stay fixed across calls, so this is shown beside the reward's timing, never used for it.
    """
    staging = [a.clone() if isinstance(a, torch.Tensor) else a for a in inputs]
    flush = torch.empty(flush_bytes // 4, dtype=torch.float32, device=device)
    current = torch.cuda.current_stream(device)
    side = torch.cuda.Stream(device)
    side.wait_stream(current)
    with torch.cuda.stream(side):  # warm-up off the capture stream, as torch.cuda.graphs asks
        for _ in range(3):
            fn(*staging)
    current.wait_stream(side)
    torch.cuda.synchronize(device)
    work, flushes = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(work):
        for i in range(calls):
            flush.fill_(float(i))
            fn(*staging)
    with torch.cuda.graph(flushes):
        for i in range(calls):
            flush.fill_(float(i))

    def replay(graph: torch.cuda.CUDAGraph) -> float:
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        begin.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize(device)
        return begin.elapsed_time(end)

    replay(work), replay(flushes)
    samples = [max(0.0, (replay(work) - replay(flushes)) / calls) for _ in range(rounds)]
    return summarize(samples, f"cuda-graph-replay x{calls}+l2-flush, flushes subtracted")
