"""Compact text renderings of result documents, sized for a terminal or an LLM context.

A full evaluation report with a profile stays under 2,000 tokens (about 8,000 characters at the usual
four characters per token): lists are cut to their top entries and names to a line.
"""

from __future__ import annotations

from evalsvc.core.profiles import (
    CandidateProfile,
    DeviceFacts,
    KernelTrace,
    NcuKernel,
    ReferenceProfile,
    Roofline,
)
from evalsvc.core.results import CompileReport, EvaluationResult, TimingStats

TOP_KERNELS = 5
TOP_OPS = 5
NAME = 70


def _t(s: TimingStats | None) -> str:
    if s is None:
        return "—"
    return f"{s.median_ms:.4g} ms (±{s.rel_ci_halfwidth * 100:.1f}%, n={s.n})"


def _cut(s: str, n: int) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"


def _name(s: str) -> str:
    return _cut(s, NAME)


def _num(x: float | None, spec: str = ".0f", unit: str = "") -> str:
    return "—" if x is None else f"{format(x, spec)}{unit}"


def _dur(ms: float) -> str:
    return f"{ms * 1e3:.4g} µs" if ms < 1 else f"{ms:.4g} ms"


def _si(x: float, unit: str) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def render_compile(c: CompileReport) -> list[str]:
    """Compiler diagnostics (first errors with file:line) and the ptxas resource report per kernel."""
    cached = " (cached)" if c.cached else ""
    lines = [f"compile: {'ok' if c.ok else 'failed'}{cached} in {c.duration_s:.1f} s"]
    for d in c.diagnostics[:4]:
        where = f"{d.file}:{d.line}" if d.file else "?"
        lines.append(f"  {d.severity} {where}: {_cut(d.message, 200)}")
    if len(c.diagnostics) > 4:
        lines.append(f"  … {len(c.diagnostics) - 4} more diagnostics")
    for k in c.resources[:6]:
        spills = (k.spill_stores_bytes or 0) + (k.spill_loads_bytes or 0)
        lines.append(
            f"  ptxas {_name(k.kernel)} [{k.arch or '?'}]: {_num(k.registers, 'd')} regs, "
            f"{_num(k.shared_bytes, 'd')} B smem, {_num(k.stack_bytes, 'd')} B stack"
            + (
                f", SPILLS {k.spill_stores_bytes} B st/{k.spill_loads_bytes} B ld"
                if spills
                else ", no spills"
            )
        )
    if len(c.resources) > 6:
        lines.append(f"  … {len(c.resources) - 6} more kernels")
    return lines


def render_roofline(r: Roofline, label: str = "roofline") -> list[str]:
    lines = [
        f"{label}: {r.verdict} on {r.measured_on}",
        f"  min bytes {_si(r.min_bytes, 'B')}, {_si(r.flops, 'FLOP')} (intensity {r.intensity:.3g} FLOP/B, "
        f"ridge {r.ridge:.3g}); measured peaks {_si(r.peak_bandwidth_bps, 'B/s')}, "
        f"{_si(r.peak_flops, 'FLOP/s')}",
        f"  floor {_dur(r.floor_ms)}"
        + (
            f"; at {_dur(r.median_ms)}: {r.bandwidth_pct:.1f}% of peak bandwidth, "
            f"{r.compute_pct:.1f}% of peak compute"
            if r.median_ms and r.bandwidth_pct is not None and r.compute_pct is not None
            else ""
        ),
    ]
    return lines


def render_trace(t: KernelTrace, label: str) -> list[str]:
    """Kernels (on a GPU) and operators ranked by time, per call."""
    lines = [
        f"{label}: {_dur(t.total_us / 1e3)} per call" + (f", {len(t.kernels)}+ kernels" if t.kernels else "")
    ]
    if t.launch_gap_us is not None and t.span_us:
        lines.append(
            f"  launch gaps {t.launch_gap_us:.3g} µs of a {t.span_us:.4g} µs span "
            f"({t.launch_gap_us / t.span_us * 100:.0f}% idle between kernels)"
        )
    for k in t.kernels[:TOP_KERNELS]:
        own = "" if k.own is None else (" [own]" if k.own else " [lib]")
        lines.append(f"  {k.share * 100:4.1f}% {_dur(k.time_us / 1e3):>9} x{k.launches}{own} {_name(k.name)}")
    for o in t.operators[:TOP_OPS]:
        shapes = f" ({_cut(o.shapes, 50)})" if o.shapes else ""
        lines.append(
            f"  op {o.share * 100:4.1f}% {_dur(o.time_us / 1e3):>9} x{o.calls} {_cut(o.name, 50)}{shapes}"
        )
    return lines


def render_ncu(k: NcuKernel) -> str:
    return (
        f"  ncu {_name(k.name)}: {_num(k.duration_us, '.3g')} µs, DRAM {_num(k.dram_pct)}%, "
        f"SM {_num(k.sm_pct)}%, occupancy {_num(k.occupancy_pct)}%, {_num(k.registers, 'd')} regs, "
        f"{_num(k.shared_bytes, 'd')} B smem, local ld/st {_num(k.local_spill_requests, '.0f')}, "
        f"limiter {k.limiter or '—'}"
    )


def render_profile(p: CandidateProfile) -> list[str]:
    lines = ["profile (measured in the candidate's process: display only)"]
    if p.own_share is not None:
        lines.append(f"  own kernels: {p.own_share * 100:.0f}% of kernel time (the rest: torch/library)")
    if p.trace is not None:
        lines += ["  " + ln for ln in render_trace(p.trace, "candidate")]
    lines += [render_ncu(k) for k in p.ncu[:3]]
    lines += [f"  note: {_cut(n, 200)}" for n in p.notes[:3]]
    return lines


def _x(speedup: float | None, ci: tuple[float, float] | None) -> str:
    if speedup is None:
        return "—"
    return f"{speedup:.2f}x" + (f" (95% {ci[0]:.2f}-{ci[1]:.2f})" if ci else "")


def render_speedup(r: EvaluationResult) -> list[str]:
    """The speedups with their intervals, and each threshold decision the interval left uncertain."""
    if r.speedup.eager is None:
        return []
    lines = [
        f"speedup: {_x(r.speedup.eager, r.speedup.eager_ci95)} vs eager, "
        f"{_x(r.speedup.compile, r.speedup.compile_ci95)} vs torch.compile"
    ]
    for d in r.decisions:
        if d.uncertain:
            verdict = "counted as passed" if d.passed else "not counted"
            lines.append(
                f"uncertain: {d.against} speedup {d.low:.2f}-{d.high:.2f}x straddles the {d.threshold:g}x "
                f"threshold of milestone {d.milestone} ({verdict})"
            )
    return lines


def render_result(r: EvaluationResult) -> str:
    reward = "none" if r.reward is None else f"{r.reward:g}"
    lines = [f"status: {r.status.value}   reward: {reward}   milestone: {r.milestone}"]
    if r.message:
        lines.append(f"message: {_cut(r.message, 800)}")
    for f in r.findings[:4]:
        where = f" ({f.file}:{f.line})" if f.file else ""
        lines.append(f"finding [{f.rule}]{where}: {_cut(f.message, 200)}")
    if len(r.findings) > 4:
        lines.append(f"… {len(r.findings) - 4} more findings")
    if r.compile:
        lines += render_compile(r.compile)
    if r.correctness:
        c = r.correctness
        passed = sum(t.passed for t in c.trials)
        lines.append(
            f"correctness: {passed}/{len(c.trials)} trials passed, max abs err {c.max_abs_err or 0:.3g}, "
            f"max rel err {c.max_rel_err or 0:.3g} (atol {c.atol:g}, rtol {c.rtol:g})"
        )
    t = r.timings
    if t.candidate or t.eager:
        lines.append(
            f"timing: candidate {_t(t.candidate)} | eager {_t(t.eager)} | "
            f"torch.compile[{t.compile_mode}] {_t(t.compiled)}"
        )
    lines += render_speedup(r)
    if r.roofline:
        lines += render_roofline(r.roofline)
    if r.profile:
        lines += render_profile(r.profile)
    for w in r.task_warnings[:2]:
        lines.append(f"task warning: {_cut(w, 200)}")
    if r.provenance:
        p = r.provenance
        lines.append(f"device: {p.device_name} ({p.device}), torch {p.torch_version}")
    return "\n".join(lines)


def render_reference_profile(p: ReferenceProfile) -> str:
    w = p.work
    lines = [
        f"reference profile of {p.task_id} on {p.device_name} ({p.device})",
        f"work: inputs {_si(w.input_bytes, 'B')}, weights {_si(w.param_bytes, 'B')}, "
        f"outputs {_si(w.output_bytes, 'B')}, {_si(w.flops, 'FLOP')}",
    ]
    lines += render_trace(p.eager, "eager")
    if p.compiled is not None:
        lines += render_trace(p.compiled, f"torch.compile[{p.compile_mode}]")
    if p.roofline:
        lines += render_roofline(p.roofline, "roofline of eager")
    lines += [f"note: {_cut(n, 200)}" for n in p.notes[:3]]
    return "\n".join(lines)


def render_devices(facts: list[tuple[str, DeviceFacts | None]]) -> str:
    """One line per device class: compute capability, SMs, memory, measured peaks, compile target."""
    lines = []
    for cls, f in facts:
        if f is None:
            lines.append(f"{cls}: no measurements published yet")
            continue
        rates = ", ".join(f"{k} {_si(v, 'FLOP/s')}" for k, v in f.matmul_flops.items())
        mem = _si(f.memory_bytes, "B") if f.memory_bytes else "—"
        lines.append(
            f"{cls}: {f.name}, cc {f.compute_capability or '—'}, {f.sm_count or '—'} SMs, {mem}, "
            f"copy {_si(f.peak_bandwidth_bps, 'B/s')}, matmul {rates}, target {f.compile_target or '—'}"
        )
    return "\n".join(lines)
