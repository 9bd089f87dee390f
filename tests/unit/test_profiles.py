"""Roofline arithmetic, kernel attribution, Nsight Compute parsing and the text budget (no I/O)."""

from __future__ import annotations

import time

import pytest
import torch

from evalsvc.core.options import EvalOptions
from evalsvc.core.profiles import (
    CandidateProfile,
    KernelStat,
    KernelTrace,
    NcuKernel,
    OpStat,
    TaskWork,
    kernel_base_name,
    mark_own,
    ncu_limiter,
    roofline,
)
from evalsvc.core.results import (
    CompileReport,
    Correctness,
    Diagnostic,
    EvaluationResult,
    Finding,
    KernelResources,
    Provenance,
    Status,
    Timings,
    TimingStats,
    TrialCheck,
)
from evalsvc.engine.ncu import parse_ncu_csv
from evalsvc.engine.plausibility import ROOFLINE_SLACK, implausible
from evalsvc.engine.profiling import task_work
from evalsvc.render import render_result

TOKEN_BUDGET = 2000  # counted as characters / 4


def stats(ms: float) -> TimingStats:
    return TimingStats(
        median_ms=ms,
        mean_ms=ms,
        iqr_ms=0,
        min_ms=ms,
        max_ms=ms,
        n=10,
        ci95_low_ms=ms,
        ci95_high_ms=ms,
        rel_ci_halfwidth=0.01,
        method="cuda-events",
    )


def test_memory_bound_roofline_by_hand() -> None:
    work = TaskWork(min_bytes=10**9, flops=10**9, input_bytes=5 * 10**8, output_bytes=5 * 10**8)
    r = roofline(work, peak_bw=4e12, peak_flops=5e13, measured_on="X", median_ms=0.5)
    assert r.bound == "memory" and r.intensity == 1.0 and r.ridge == 12.5
    assert r.floor_ms == pytest.approx(0.25)  # 1e9 B / 4e12 B/s
    assert r.bandwidth_pct == pytest.approx(50.0) and r.compute_pct == pytest.approx(4.0)
    assert r.verdict == "memory-bound, 50% of peak DRAM bandwidth (50% of roofline)"


def test_compute_bound_roofline_by_hand() -> None:
    n = 4096
    work = TaskWork(
        min_bytes=3 * 4 * n * n, flops=2 * n**3, input_bytes=2 * 4 * n * n, output_bytes=4 * n * n
    )
    r = roofline(work, peak_bw=4e12, peak_flops=5e13, measured_on="X", median_ms=5.0)
    assert r.bound == "compute"
    assert r.floor_ms == pytest.approx(2 * n**3 / 5e13 * 1e3)
    assert r.compute_pct == pytest.approx(100 * 2 * n**3 / 5e-3 / 5e13)
    assert r.verdict.startswith("compute-bound, 55% of peak compute")
    no_time = roofline(work, 4e12, 5e13, "X")
    assert no_time.bandwidth_pct is None and "floor" in no_time.verdict


def test_task_work_counts_inputs_weights_outputs_and_matmul_flops() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU())
    work = task_work(model, [torch.randn(8, 64)])
    assert work.flops == 2 * 8 * 64 * 32
    assert (work.input_bytes, work.param_bytes, work.output_bytes) == (
        4 * 8 * 64,
        4 * (64 * 32 + 32),
        4 * 8 * 32,
    )
    assert work.min_bytes == work.input_bytes + work.param_bytes + work.output_bytes


@pytest.mark.parametrize(
    ("name", "base"),
    [
        ("void relu_kernel<float>(float const*, float*, int)", "relu_kernel"),
        ("relu_kernel(float const*, float*, int)", "relu_kernel"),
        ("_Z11relu_kernelPKfPfi", "_Z11relu_kernelPKfPfi"),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous",
            "vectorized_elementwise_kernel",
        ),
        (
            "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32",
            "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32",
        ),
        ("void ns::softmax_rows_vec4<8>(float const*, float*, int, int)", "softmax_rows_vec4"),
        (  # torch's softmax as the profiler names it (seen on the H200), and as Nsight Compute does
            "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::",
            "cunn_SoftMaxForward",
        ),
        (
            "void <unnamed>::cunn_SoftMaxForward<4, float, float, float, Epilogue>(T4 *, const T2 *, int)",
            "cunn_SoftMaxForward",
        ),
        ("(anonymous namespace)::", ""),
    ],
)
def test_kernel_base_name(name: str, base: str) -> None:
    assert kernel_base_name(name) == base


def test_own_kernels_are_the_ones_ptxas_reported() -> None:
    kernels = [
        KernelStat(
            name="void softmax_rows_vec4<8>(float const*, float*, int, int)",
            launches=1,
            time_us=30,
            share=0.75,
        ),
        KernelStat(name="void at::native::fill_kernel<float>(float*)", launches=2, time_us=10, share=0.25),
    ]
    share = mark_own(kernels, ["void softmax_rows_vec4<8>(const float *, float *, int, int)"])
    assert share == pytest.approx(0.75) and [k.own for k in kernels] == [True, False]
    assert mark_own([], ["x"]) is None


def test_ncu_limiter_follows_the_speed_of_light_rule() -> None:
    assert ncu_limiter(20.0, 85.0) == "memory"
    assert ncu_limiter(90.0, 40.0) == "compute"
    assert ncu_limiter(30.0, 40.0) == "latency"
    assert ncu_limiter(None, 40.0) is None


NCU_HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","dram__throughput.avg.pct_of_peak_sustained_elapsed",'
    '"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed","gpu__time_duration.sum",'
    '"launch__registers_per_thread","launch__shared_mem_per_block_dynamic","launch__shared_mem_per_block_static",'
    '"sm__throughput.avg.pct_of_peak_sustained_elapsed","sm__warps_active.avg.pct_of_peak_sustained_active",'
    '"smsp__sass_inst_executed_op_local_ld.sum","smsp__sass_inst_executed_op_local_st.sum"'
)
NCU_UNITS = (
    '"","","","","","","","","","","","%","%","ns","register/thread","byte","byte","%","%","inst","inst"'
)
LAUNCH = '"{id}","4242","python3.12","h","{name}","1","7","(256, 1, 1)","(81920, 1, 1)","0","9.0",{metrics}'
RELU = "relu_kernel(float const*, float*, int)"
# `ncu --csv --page raw --print-units base` as Nsight Compute 2025 prints it (a boundary we do not own).
NCU_CSV = "\n".join(
    [
        "==PROF== Connected to process 4242 (/usr/bin/python3.12)",
        '==PROF== Profiling "relu_kernel": 0%....50%....100% - 3 passes',
        NCU_HEADER,
        NCU_UNITS,
        LAUNCH.format(id=0, name=RELU, metrics='"87.12","87.12","52,480","16","0","0","21.5","81.3","0","0"'),
        LAUNCH.format(id=1, name=RELU, metrics='"88.00","88.00","52,000","16","0","0","21.5","81.3","0","0"'),
        LAUNCH.format(
            id=2,
            name="void tiny<int>(int*)",
            metrics='"0.1","0.3","2,112","40","1024","512","1.2","6.1","12","8"',
        ),
        "==PROF== Disconnected from process 4242",
    ]
)


def test_ncu_csv_one_row_per_kernel_ranked_by_duration() -> None:
    rows = parse_ncu_csv(NCU_CSV)
    assert [r.name for r in rows] == ["relu_kernel(float const*, float*, int)", "void tiny<int>(int*)"]
    relu, tiny = rows
    assert relu.duration_us == pytest.approx(52.48) and relu.dram_pct == pytest.approx(87.12)  # first launch
    assert relu.limiter == "memory" and relu.registers == 16 and relu.occupancy_pct == pytest.approx(81.3)
    assert tiny.shared_bytes == 1536 and tiny.local_spill_requests == 20 and tiny.limiter == "latency"
    assert parse_ncu_csv("==ERROR== ERR_NVGPUCTRPERM - no permission") == []


def test_implausible_speed_uses_the_measured_peak_on_gpus_only() -> None:
    work = TaskWork(min_bytes=4 * 10**8, flops=0, input_bytes=2 * 10**8, output_bytes=2 * 10**8)
    peak_bw = 4e12  # 0.1 ms for the minimum bytes; 0.08 ms with the slack
    fast = Timings(candidate=stats(0.05), eager=stats(0.2))
    plausible = Timings(candidate=stats(0.09), eager=stats(0.2))
    roof = roofline(work, peak_bw, 5e13, "X", 0.05)
    gpu = torch.device("cuda")  # the rule alone: no runner
    found = implausible(gpu, fast, roof, EvalOptions())
    assert [f.rule for f in found] == ["faster_than_memory_roofline"]
    assert f"{peak_bw * ROOFLINE_SLACK / 1e12:.2f} TB/s" in found[0].message
    assert implausible(gpu, plausible, roof, EvalOptions()) == []
    assert implausible(gpu, fast, None, EvalOptions()) == []  # no roofline (FLOP counter refused): no flag
    cpu = torch.device("cpu")
    assert implausible(cpu, fast, roof, EvalOptions()) == []  # CPU caches can outlast the flush
    assert [f.rule for f in implausible(cpu, fast, roof, EvalOptions(max_speedup=2))] == [
        "implausible_speedup"
    ]


def _largest_report() -> EvaluationResult:
    """Every list at or past what the renderer shows, every name and message at its longest."""
    long = "x" * 400
    kname = (
        "void very_long_namespace::kernel_name_" + "k" * 200 + "<float, 128, 4>(float const*, float*, int)"
    )
    trace = KernelTrace(
        runs=3,
        total_us=1234.5,
        launch_gap_us=12.5,
        span_us=1300.0,
        kernels=[
            KernelStat(name=kname, launches=3, time_us=100.0, share=0.1, own=i % 2 == 0) for i in range(10)
        ],
        operators=[
            OpStat(name="aten::" + "o" * 80, shapes=str([[4096] * 6] * 4), calls=2, time_us=50.0, share=0.05)
            for _ in range(10)
        ],
    )
    ncu = [
        NcuKernel(
            name=kname,
            duration_us=100.0,
            dram_pct=80.0,
            sm_pct=20.0,
            memory_pct=85.0,
            occupancy_pct=60.0,
            registers=64,
            shared_bytes=49152,
            local_spill_requests=100.0,
            limiter="memory",
        )
        for _ in range(5)
    ]
    work = TaskWork(
        min_bytes=10**9, flops=10**10, input_bytes=5 * 10**8, param_bytes=10**6, output_bytes=5 * 10**8
    )
    return EvaluationResult(
        status=Status.OK,
        correct=True,
        reward=1,
        milestone=1,
        message=long * 5,
        findings=[Finding(rule="implausible_speedup", message=long, file="solution.py", line=1)] * 12,
        compile=CompileReport(
            ok=True,
            duration_s=12.0,
            diagnostics=[Diagnostic(severity="warning", message=long, file="main.cu", line=3)] * 12,
            resources=[
                KernelResources(
                    kernel=kname,
                    arch="sm_90a",
                    registers=64,
                    shared_bytes=4096,
                    stack_bytes=0,
                    spill_stores_bytes=8,
                    spill_loads_bytes=8,
                )
            ]
            * 12,
        ),
        correctness=Correctness(
            atol=1e-2,
            rtol=1e-2,
            trials=[TrialCheck(trial=i, passed=True, candidate_first=False) for i in range(50)],
        ),
        timings=Timings(candidate=stats(1.0), eager=stats(2.0), compiled=stats(1.5), compile_mode="default"),
        roofline=roofline(work, 4e12, 5e13, "NVIDIA H200", 1.0),
        profile=CandidateProfile(trace=trace, own_share=0.5, ncu=ncu, notes=[long] * 3),
        task_warnings=[long] * 5,
        provenance=Provenance(
            device="cuda:0", device_name="NVIDIA H200", torch_version="2.11", task_hash="t", solution_hash="s"
        ),
    )


def test_full_text_report_stays_under_the_token_budget() -> None:
    text = render_result(_largest_report())
    assert len(text) // 4 < TOKEN_BUDGET, len(text)
    for part in (
        "roofline: memory-bound",
        "ncu ",
        "launch gaps",
        "own kernels: 50%",
        "ptxas ",
        "SPILLS",
        "[own]",
    ):
        assert part in text, part


def test_a_trace_from_the_candidate_process_is_bounded() -> None:
    from pydantic import ValidationError

    row = {"name": "k" * 10_000, "launches": 1, "time_us": 1.0, "share": 1.0}
    op = {**row, "calls": 1, "shapes": "s" * 9999}
    trace = KernelTrace.model_validate({"kernels": [row], "operators": [op]})
    assert len(trace.kernels[0].name) == 160 and len(trace.operators[0].shapes) == 200
    with pytest.raises(ValidationError):
        KernelTrace.model_validate({"kernels": [row] * 10_000})


class _DeviceEvent:
    """The four accessors of a kineto event that `_kernels` reads (torch's profiler: a boundary)."""

    def __init__(self, name: str, start_us: float, dur_us: float) -> None:
        self._n, self._s, self._d = name, int(start_us * 1e3), int(dur_us * 1e3)

    def name(self) -> str:
        return self._n

    def device_type(self) -> torch.autograd.DeviceType:
        return torch.autograd.DeviceType.CUDA

    def start_ns(self) -> int:
        return self._s

    def duration_ns(self) -> int:
        return self._d


def test_gpu_trace_per_call_kernels_and_launch_gaps() -> None:
    from types import SimpleNamespace

    from evalsvc.engine.profiling import _kernels

    events = []
    for call_start in (0.0, 200.0):  # two calls, a synchronisation between them
        events += [
            _DeviceEvent("gemm", call_start, 10.0),
            _DeviceEvent("bias_relu", call_start + 12.0, 3.0),  # 2 µs idle after the gemm
        ]
    prof = SimpleNamespace(profiler=SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: events)))
    trace = KernelTrace(runs=2)
    _kernels(prof, 2, trace)
    rows = [(k.name, k.launches, k.time_us) for k in trace.kernels]
    assert rows == [("gemm", 1, 10.0), ("bias_relu", 1, 3.0)]
    assert trace.total_us == 13.0 and trace.kernels[0].share == pytest.approx(10 / 13)
    assert trace.launch_gap_us == pytest.approx(2.0)  # per call; the 185 µs between calls left out
    assert trace.span_us == pytest.approx(15.0)


def test_cpu_operator_times_are_medians_over_the_runs() -> None:
    """One stalled run (a preempted call on a busy host) must not rank a cheap step above the real work."""
    from torch.profiler import record_function

    from evalsvc.engine.profiling import trace_calls

    calls = []
    a = torch.randn(256, 256)

    def fn(x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        with record_function("stall"):
            if len(calls) == 3:  # the second profiled run (one warm-up call comes first)
                time.sleep(0.05)
        return x @ a

    trace = trace_calls(fn, [torch.randn(256, 256)], torch.device("cpu"), runs=3)
    names = [o.name for o in trace.operators]
    assert names[0] == "aten::mm", trace.operators
    stall = [o for o in trace.operators if o.name == "stall"]
    assert all(o.time_us < 10_000 for o in stall), stall  # the 50 ms run is not the figure
