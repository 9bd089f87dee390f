"""This worker's device as measured, not as a datasheet says: peak copy bandwidth and matmul rates.

Measured once per process (a large device-to-device copy, large matmuls per precision) and cached; the
worker publishes the result with its heartbeat, and the judge's roofline uses the same numbers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import cache

import torch

from evalsvc.core.profiles import DeviceFacts, Roofline, TaskWork, roofline
from evalsvc.engine.device_info import device_name

CUDA_COPY_BYTES = 1 << 30
CPU_COPY_BYTES = 256 << 20
CUDA_MATMUL_N = 8192
CPU_MATMUL_N = 1024


def _best_seconds(fn: Callable[[], object], device: torch.device, reps: int, rounds: int = 3) -> float:
    """The fastest of `rounds` timings of `reps` back-to-back calls, per call."""
    fn()
    best = float("inf")
    for _ in range(rounds):
        if device.type == "cuda":
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize(device)
            begin.record()
            for _ in range(reps):
                fn()
            end.record()
            torch.cuda.synchronize(device)
            secs = begin.elapsed_time(end) / 1e3
        else:
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            secs = time.perf_counter() - t0
        best = min(best, secs / reps)
    return best


def _copy_bandwidth(device: torch.device) -> float:
    nbytes = CUDA_COPY_BYTES if device.type == "cuda" else CPU_COPY_BYTES
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    secs = _best_seconds(lambda: dst.copy_(src), device, reps=10 if device.type == "cuda" else 2)
    return 2 * nbytes / secs  # read + write


def _matmul_rate(device: torch.device, dtype: torch.dtype, tf32: bool) -> float:
    n = CUDA_MATMUL_N if device.type == "cuda" else CPU_MATMUL_N
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        secs = _best_seconds(lambda: torch.mm(a, b), device, reps=10 if device.type == "cuda" else 2)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    return 2 * n**3 / secs


@cache
def measured_peaks(device: str) -> tuple[float, dict[str, float]]:
    """(copy bandwidth in bytes/s, matmul flop/s per precision) of `device`, measured once per process."""
    dev = torch.device(device)
    bandwidth = _copy_bandwidth(dev)
    rates = {"fp32": _matmul_rate(dev, torch.float32, tf32=False)}
    if dev.type == "cuda":
        rates["tf32"] = _matmul_rate(dev, torch.float32, tf32=True)
        rates["bf16"] = _matmul_rate(dev, torch.bfloat16, tf32=False)
        torch.cuda.empty_cache()
    return bandwidth, rates


def device_facts(device: str, cuda_arch: str | None = None) -> DeviceFacts:
    """What /v1/devices says about this worker's device class, with its compile target."""
    dev = torch.device(device)
    bandwidth, rates = measured_peaks(device)
    if dev.type != "cuda":
        return DeviceFacts(
            name=device_name(dev), kind="cpu", peak_bandwidth_bps=bandwidth, matmul_flops=rates
        )
    props = torch.cuda.get_device_properties(dev)
    return DeviceFacts(
        name=device_name(dev),
        kind="cuda",
        compute_capability=f"{props.major}.{props.minor}",
        sm_count=props.multi_processor_count,
        memory_bytes=props.total_memory,
        peak_bandwidth_bps=bandwidth,
        matmul_flops=rates,
        compile_target=f"sm_{cuda_arch}" if cuda_arch else None,
    )


def task_roofline(
    device: torch.device, work: TaskWork, precision: str, tf32: bool, median_ms: float | None
) -> Roofline:
    """The task's work against this device's measured peaks (the matmul rate of the task's precision)."""
    facts = device_facts(str(device))
    return roofline(work, facts.peak_bandwidth_bps, facts.peak_flops(precision, tf32), facts.name, median_ms)
