"""Profiles, roofline verdicts and device facts: what an agent looks at first to make a kernel faster.

Plain data and arithmetic only (no torch): the engine measures, this module decides what it means.
Everything a candidate's process reports is display-only; only the judge's own numbers feed a verdict.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import BaseModel, Field, field_validator

NAME_CHARS = 160
MAX_ROWS = 16  # a trace from the candidate's process with more rows than we ever make is refused


def _cut(v: str, n: int = NAME_CHARS) -> str:
    return v[:n]


class OpStat(BaseModel):
    """One operator (with one input-shape signature), summed over the profiled calls."""

    name: str
    shapes: str = ""
    calls: int
    time_us: float = Field(description="self device time (CPU time on the CPU device) per profiled call")
    share: float = Field(description="share of all operators' time")

    @field_validator("name", "shapes")
    @classmethod
    def _short(cls, v: str) -> str:
        return _cut(v, 200)


class KernelStat(BaseModel):
    """One device kernel (or memcpy/memset), summed over the profiled calls."""

    name: str
    launches: int = Field(description="launches per profiled call")
    time_us: float = Field(description="device time per profiled call")
    share: float = Field(description="share of all kernel time")
    own: bool | None = Field(None, description="the candidate's own kernel (None: not a candidate profile)")

    @field_validator("name")
    @classmethod
    def _short(cls, v: str) -> str:
        return _cut(v)


class NcuKernel(BaseModel):
    """Nsight Compute's fixed metric set for one kernel launch (the first of its name)."""

    name: str
    duration_us: float | None = None
    dram_pct: float | None = Field(None, description="DRAM throughput, % of peak")
    sm_pct: float | None = Field(None, description="compute (SM) throughput, % of peak")
    memory_pct: float | None = Field(None, description="memory throughput (any level), % of peak")
    occupancy_pct: float | None = Field(None, description="achieved occupancy, % of the theoretical maximum")
    registers: int | None = Field(None, description="registers per thread")
    shared_bytes: int | None = Field(None, description="shared memory per block, static + dynamic")
    local_spill_requests: float | None = Field(None, description="local-memory load+store instructions")
    limiter: str | None = Field(None, description="compute, memory or latency (Nsight's speed-of-light rule)")


class KernelTrace(BaseModel):
    """What a profiler trace says about one callable: kernels, operators and the gaps between launches."""

    runs: int = 0
    total_us: float = Field(0.0, description="device time per call, all kernels (CPU time on the CPU)")
    kernels: list[KernelStat] = Field(default_factory=list, max_length=MAX_ROWS)
    operators: list[OpStat] = Field(default_factory=list, max_length=MAX_ROWS)
    launch_gap_us: float | None = Field(None, description="idle device time between kernels inside one call")
    span_us: float | None = Field(None, description="first kernel start to last kernel end, one call")


class CandidateProfile(BaseModel):
    """The candidate's profile: a trace from its own process (untrusted, display-only) and Nsight Compute."""

    trace: KernelTrace | None = None
    own_share: float | None = Field(None, description="share of kernel time in the solution's own kernels")
    ncu: list[NcuKernel] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="what was not measured and why")


class DeviceFacts(BaseModel):
    """One device class, as a worker measured it at start-up."""

    name: str
    kind: Literal["cuda", "cpu"]
    compute_capability: str | None = None
    sm_count: int | None = None
    memory_bytes: int | None = None
    peak_bandwidth_bps: float = Field(description="measured: a large device-to-device copy, bytes/s")
    matmul_flops: dict[str, float] = Field(description="measured: a large matmul per precision, flop/s")
    compile_target: str | None = Field(None, description="nvcc target the compile stage builds, e.g. sm_90a")

    def peak_flops(self, precision: str = "fp32", tf32: bool = False) -> float:
        """The matmul rate that bounds a task of this precision (fp32 falls back where a rate is missing)."""
        key = (
            "tf32" if precision == "fp32" and tf32 else ("bf16" if precision in ("bf16", "fp16") else "fp32")
        )
        return self.matmul_flops.get(key) or self.matmul_flops["fp32"]


class TaskWork(BaseModel):
    """The least work any correct solution must do: read the inputs and the weights, write the outputs,
    and the reference's floating-point operations (torch's FLOP counter: matmul-like operators only)."""

    min_bytes: int
    flops: int
    input_bytes: int
    param_bytes: int = 0
    output_bytes: int


class Roofline(BaseModel):
    min_bytes: int
    flops: int
    peak_bandwidth_bps: float
    peak_flops: float
    measured_on: str = Field(description="device whose peaks were measured")
    intensity: float = Field(description="flops per minimum byte")
    ridge: float = Field(description="flops per byte where the device turns compute-bound")
    bound: Literal["memory", "compute"]
    floor_ms: float = Field(description="the least time the hardware allows for the task")
    median_ms: float | None = None
    bandwidth_pct: float | None = Field(None, description="min bytes / time over peak bandwidth, %")
    compute_pct: float | None = Field(None, description="flops / time over peak compute, %")
    verdict: str = ""


class ReferenceProfile(BaseModel):
    """The reference as eager PyTorch and as torch.compile runs it: where the time goes, which ops to fuse."""

    task_id: str
    device: str
    device_name: str
    eager: KernelTrace
    compiled: KernelTrace | None = None
    compile_mode: str | None = None
    work: TaskWork
    roofline: Roofline | None = None
    notes: list[str] = Field(default_factory=list)


def roofline(
    work: TaskWork, peak_bw: float, peak_flops: float, measured_on: str, median_ms: float | None = None
) -> Roofline:
    """Where a time stands against the device's measured peaks (the classic roofline bound)."""
    intensity = work.flops / work.min_bytes if work.min_bytes else math.inf
    ridge = peak_flops / peak_bw
    bound: Literal["memory", "compute"] = "compute" if intensity > ridge else "memory"
    floor_s = max(work.min_bytes / peak_bw, work.flops / peak_flops)
    r = Roofline(
        min_bytes=work.min_bytes,
        flops=work.flops,
        peak_bandwidth_bps=peak_bw,
        peak_flops=peak_flops,
        measured_on=measured_on,
        intensity=intensity if math.isfinite(intensity) else 0.0,
        ridge=ridge,
        bound=bound,
        floor_ms=floor_s * 1e3,
        median_ms=median_ms,
    )
    if median_ms and median_ms > 0:
        secs = median_ms / 1e3
        r.bandwidth_pct = 100 * work.min_bytes / secs / peak_bw
        r.compute_pct = 100 * work.flops / secs / peak_flops
        pct, what = (r.bandwidth_pct, "DRAM bandwidth") if bound == "memory" else (r.compute_pct, "compute")
        r.verdict = (
            f"{bound}-bound, {pct:.0f}% of peak {what} ({r.floor_ms / median_ms * 100:.0f}% of roofline)"
        )
    else:
        r.verdict = f"{bound}-bound task, floor {r.floor_ms * 1e3:.1f} µs"
    return r


def kernel_base_name(name: str) -> str:
    """`void ns::relu_kernel<float>(float const*, int)` -> `relu_kernel`: comparable across the ptxas
    report and profiler traces."""
    s = name.strip().removeprefix("void ")
    s = s.replace("(anonymous namespace)::", "").replace("<unnamed>::", "").replace("unnamed::", "")
    s = re.split(r"[<(]", s, maxsplit=1)[0].strip()
    words = s.rsplit("::", 1)[-1].split()
    return words[-1] if words else s


def mark_own(kernels: list[KernelStat], own_names: list[str]) -> float | None:
    """Mark the kernels named in the solution's ptxas report; returns their share of kernel time."""
    if not kernels:
        return None
    own = {kernel_base_name(n) for n in own_names}
    for k in kernels:
        k.own = kernel_base_name(k.name) in own
    total = sum(k.time_us for k in kernels)
    return sum(k.time_us for k in kernels if k.own) / total if total > 0 else None


def ncu_limiter(sm_pct: float | None, memory_pct: float | None) -> str | None:
    """Nsight Compute's speed-of-light rule: past 60% of peak the larger unit bounds the kernel, under it
    neither is busy enough and latency does."""
    if sm_pct is None or memory_pct is None:
        return None
    if max(sm_pct, memory_pct) < 60:
        return "latency"
    return "compute" if sm_pct >= memory_pct else "memory"
