"""The result document: the one shape every interface (CLI, HTTP, queue) returns for an evaluation."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from evalsvc.core.profiles import CandidateProfile, Roofline


class Status(StrEnum):
    """How an evaluation ended. Every failure of the candidate is one of these, never an exception."""

    OK = "ok"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    INCORRECT = "incorrect"
    FORBIDDEN = "forbidden"
    TIMEOUT = "timeout"
    INTERNAL_ERROR = "internal_error"
    # Ended by its tenant (DELETE) before a result was written: no reward, never the candidate's verdict
    CANCELLED = "cancelled"


class FailureKind(StrEnum):
    """What failed, where the status alone does not say (metrics count these; the reward follows the
    status). Absent when the candidate's own answer decided the status."""

    RUNNER_DIED = "runner_died"  # the candidate's process ended without answering (crash, kill, OOM)
    # The runner never became ready (no candidate code had run): ours, and a service delivers the job again
    RUNNER_START_FAILED = "runner_start_failed"
    TASK_INVALID = "task_invalid"  # the task itself could not be loaded or its inputs made
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"  # the compile sandbox (Docker engine) was unreachable
    JOB_ABANDONED = "job_abandoned"  # the job killed its worker on every attempt, up to max_attempts
    WORKER_ERROR = "worker_error"  # an unexpected error of ours in the worker around the evaluation
    # The job's stored record no longer reads as a job (corrupt, fields missing, values refused): failed unrun
    RECORD_UNREADABLE = "record_unreadable"


class TimingStats(BaseModel):
    """Robust statistics of repeated timed calls, in milliseconds."""

    median_ms: float
    mean_ms: float
    iqr_ms: float
    min_ms: float
    max_ms: float
    n: int
    ci95_low_ms: float
    ci95_high_ms: float
    rel_ci_halfwidth: float = Field(description="half-width of the 95% CI of the median over the median")
    method: str = Field(description="how the samples were taken, e.g. 'cuda-events+l2-flush' or 'wall-clock'")
    warmup_calls: int | None = Field(
        None, description="untimed calls before the first sample (until settled)"
    )


class JudgedTiming(BaseModel):
    """The candidate's timing as the judge's own clock saw it, outside the candidate's process: the
    candidate's median is believed only where it is not faster than this allows."""

    per_call_ms: float = Field(
        description="the fastest round's time per call on the judge's clock, less the runner's own cost per "
        "call (measured on a null candidate before the candidate was imported)"
    )
    round_min_ms: float = Field(description="the fastest round's time per call on the judge's clock")
    round_min_reported_ms: float | None = Field(
        None,
        description="the runner's own time per call in that fastest round (the larger of its mean and "
        "median): held to the judge's figure like the median, round for round",
    )
    overhead_ms: float = Field(description="the runner's own cost per call (median over the null rounds)")
    overhead_min_ms: float = Field(description="the runner's own cost per call (fastest null round but one)")
    overhead_max_ms: float = Field(
        0.0, description="the runner's own cost per call (slowest null round but one)"
    )
    rounds: int
    calls_checked: int = Field(
        0, description="timed calls whose outputs were checked after their round (picked at random)"
    )
    library_share: float | None = Field(
        None,
        description="CPU device: share of the compute per call (library and own code, not the interpreter or "
        "C runtime) the candidate added to the runner's own that ran in libraries or generated code (perf "
        "sampling by the judge); over 0.5 is library_compute",
    )
    sampled: int | None = Field(None, description="CPU device: samples behind library_share")
    cpu_per_call_ms: float | None = Field(
        None,
        description="CPU device: the fastest round's CPU time of the runner process per call (read by the "
        "judge from outside it), less the runner's own CPU time per call on the null candidate",
    )
    cpu_overhead_ms: float | None = Field(
        None, description="CPU device: the runner's own CPU time per call (median over the null rounds)"
    )
    cpu_overhead_spread_ms: float | None = Field(
        None, description="CPU device: slowest less fastest null round (each but one), CPU time per call"
    )
    cpu_round_reported_ms: float | None = Field(
        None,
        description="CPU device: the runner's own time per call in the round with the least CPU time per "
        "call (the larger of its mean and median)",
    )
    confirmed_high_ms: float | None = Field(
        None,
        description="CPU device: the slowest time per call the judge's clock allows (its figure with the "
        "slack the floor takes off, added); the candidate's 95% interval reaches up to it, so a reward "
        "rests only on what the judge could confirm from outside the runner",
    )


class BaselineCheck(BaseModel):
    """A cached baseline re-checked by a short fresh measurement in this evaluation's conditions."""

    kind: Literal["eager", "compiled"]
    cached_ms: float
    check_ms: float
    tolerance: float = Field(description="relative difference allowed before the cached baseline is replaced")
    replaced: bool = Field(
        description="they disagreed: re-measured in full, and the new figure used and cached"
    )


class AutotuneChoice(BaseModel):
    """A @triton.autotune kernel's tuning at the candidate's first call (never in a timed round), as the
    candidate's runner reported it: display only, not checked."""

    kernel: str = Field(max_length=200)
    config: str = Field(max_length=500, description="the chosen config, as Triton prints it")
    configs: int = Field(ge=0, description="configs benchmarked")
    tuning_ms: float = Field(ge=0, allow_inf_nan=False, description="wall time of the tuning call")


class Timings(BaseModel):
    candidate: TimingStats | None = None
    candidate_judged: JudgedTiming | None = Field(
        None, description="the judge's own clock around the candidate's timed rounds"
    )
    eager: TimingStats | None = None
    compiled: TimingStats | None = None
    compile_mode: str | None = None
    baseline_cached: bool = Field(
        False, description="every baseline of this evaluation came from the fleet's baseline cache"
    )
    eager_cached: bool = Field(False, description="the eager baseline came from the cache (not measured)")
    compiled_cached: bool = Field(False, description="the torch.compile baseline came from the cache")
    baseline_checks: list[BaselineCheck] = Field(default_factory=list)
    baselines_measured_s: float | None = Field(
        None, description="seconds this evaluation spent measuring baselines (about 0 when all were cached)"
    )
    candidate_graph: TimingStats | None = Field(
        None,
        description="kernels under 25 µs on a GPU: per-call time from CUDA-graph replays (no launch "
        "overhead, fixed input values); shown beside the reward's timing, never used for it",
    )
    eager_graph: TimingStats | None = Field(None, description="the eager reference timed the same way")
    autotune: list[AutotuneChoice] = Field(
        default_factory=list, description="Triton: each autotuned kernel's chosen config and tuning time"
    )


class Speedup(BaseModel):
    eager: float | None = None
    compile: float | None = None
    eager_ci95: tuple[float, float] | None = Field(
        None, description="the eager speedup's interval: baseline CI over candidate CI, low and high ends"
    )
    compile_ci95: tuple[float, float] | None = Field(None, description="the same against torch.compile")


class ThresholdDecision(BaseModel):
    """One threshold of the reward schedule against the speedup's interval: clear when the whole interval
    lies on one side of it, uncertain when it straddles it (then `passed` follows the schedule's rule)."""

    milestone: int = Field(description="the milestone that passing this threshold earns")
    against: Literal["eager", "compile"]
    threshold: float
    median: float | None = None
    low: float | None = None
    high: float | None = None
    passed: bool
    uncertain: bool


class TrialCheck(BaseModel):
    """The outcome of one correctness trial."""

    trial: int
    passed: bool
    candidate_first: bool
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    message: str | None = None


class Correctness(BaseModel):
    trials: list[TrialCheck] = Field(default_factory=list)
    first_failure: int | None = None
    atol: float
    rtol: float
    relative_check: bool = Field(False, description="a norm-relative check was used (tiny-output task)")
    arithmetic: str | None = Field(
        None, description="the arithmetic the task allows (fp32 tasks: fp32, tf32, bf16 or any)"
    )
    arithmetic_checked: bool = Field(
        False, description="the first trial's output was checked for reduced-precision inputs (precision.py)"
    )
    max_abs_err: float | None = None
    max_rel_err: float | None = None


class Finding(BaseModel):
    """One reason a submission was refused or flagged."""

    rule: str
    message: str
    file: str | None = None
    line: int | None = None


class Diagnostic(BaseModel):
    """One compiler message, trimmed, with its location."""

    severity: str
    message: str
    file: str | None = None
    line: int | None = None


class KernelResources(BaseModel):
    """ptxas' resource report for one kernel."""

    kernel: str
    arch: str | None = None
    registers: int | None = None
    shared_bytes: int | None = None
    stack_bytes: int | None = None
    spill_stores_bytes: int | None = None
    spill_loads_bytes: int | None = None


class TritonKernel(BaseModel):
    """One Triton kernel specialisation compiled ahead of time on the CPU fleet, as a launch of the traced
    forward asked for it."""

    name: str
    file: str | None = None
    line: int | None = None
    signature: str = ""
    constexprs: str = ""
    num_warps: int | None = None
    num_stages: int | None = None
    ok: bool = True
    seconds: float = 0.0


class TritonCompile(BaseModel):
    """The ahead-of-time pass of a Triton solution: the launches one traced forward made, the kernels compiled
    for the target from them (stored in the artifact), and what the trace could not do."""

    target: str = Field(description="what the kernels were compiled for, e.g. cuda:90")
    triton_version: str | None = None
    launches_traced: int = 0
    kernels: list[TritonKernel] = Field(default_factory=list)
    autotune_configs: int = Field(0, description="configs of @triton.autotune kernels compiled ahead")
    trace_note: str | None = Field(
        None, description="why the trace stopped early: kernels it did not reach compile at first launch"
    )


class CompileReport(BaseModel):
    ok: bool
    cached: bool = False
    duration_s: float = 0.0
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    log_excerpt: str = ""
    resources: list[KernelResources] = Field(default_factory=list)
    light_headers: bool = Field(
        False,
        description="the CUDA sources were built against the torch headers they use, not torch/extension.h "
        "(same sources otherwise; faster with nvcc); false: built as written",
    )
    fast_path: bool | None = Field(
        None,
        description="load_inline builds: true when every extension was built on the fast path (against "
        "evalsvc's stand-in for torch's headers, linked with its bridge to ATen); false: built as written "
        "(see fast_path_reason); null: nothing built here (a cache hit of an older recipe, Triton)",
    )
    fast_path_reason: str | None = Field(None, description="why a build did not take the fast path")
    artifact_key: str | None = None
    triton: TritonCompile | None = Field(None, description="Triton solutions: the ahead-of-time compile")


class Provenance(BaseModel):
    device: str
    device_name: str
    driver: str | None = None
    torch_version: str
    cuda_version: str | None = None
    toolchain_hash: str | None = None
    sm_clock_mhz: int | None = None
    temperature_c: int | None = None
    tf32: bool = False
    seeds: list[int] = Field(default_factory=list)
    task_hash: str
    solution_hash: str
    worker: str | None = None


class EvaluationResult(BaseModel):
    """Everything an agent or trainer needs: the verdict, the reward and why."""

    status: Status
    failure: FailureKind | None = Field(None, description="what failed, when the status alone does not say")
    solution_format: str | None = Field(
        None, description="kernelbench, cuda_agent or triton (a KernelBench file launching Triton kernels)"
    )
    correct: bool = False
    reward: float | None = Field(
        description="the schedule's reward; null only for `cancelled` (no verdict, so no reward)"
    )
    milestone: int | None = None
    message: str | None = None
    speedup: Speedup = Field(default_factory=Speedup)
    decisions: list[ThresholdDecision] = Field(
        default_factory=list, description="each threshold of the schedule against the speedup's interval"
    )
    uncertain: bool = Field(
        False, description="a threshold this reward rests on lies inside the speedup's interval"
    )
    timings: Timings = Field(default_factory=Timings)
    correctness: Correctness | None = None
    compile: CompileReport | None = None
    findings: list[Finding] = Field(default_factory=list)
    task_warnings: list[str] = Field(default_factory=list, description="what makes the task a weak judge")
    provenance: Provenance | None = None
    roofline: Roofline | None = Field(None, description="the candidate against the device's measured peaks")
    profile: CandidateProfile | None = Field(None, description="with options.profile: display-only")
    duration_s: float = 0.0
