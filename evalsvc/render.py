"""Compact text renderings of result documents, sized for a terminal or an LLM context."""

from __future__ import annotations

from evalsvc.core.results import EvaluationResult, TimingStats


def _t(s: TimingStats | None) -> str:
    if s is None:
        return "—"
    return f"{s.median_ms:.4g} ms (±{s.rel_ci_halfwidth * 100:.1f}%, n={s.n})"


def render_result(r: EvaluationResult) -> str:
    lines = [f"status: {r.status.value}   reward: {r.reward:g}   milestone: {r.milestone}"]
    if r.message:
        lines.append(f"message: {r.message.strip()[:1500]}")
    for f in r.findings:
        where = f" ({f.file}:{f.line})" if f.file else ""
        lines.append(f"finding [{f.rule}]{where}: {f.message}")
    if r.compile:
        c = r.compile
        lines.append(
            f"compile: {'ok' if c.ok else 'failed'}{' (cached)' if c.cached else ''} in {c.duration_s:.1f} s"
        )
        for d in c.diagnostics[:5]:
            lines.append(f"  {d.severity} {d.file}:{d.line}: {d.message}")
        for k in c.resources[:6]:
            lines.append(
                f"  ptxas {k.kernel[:60]}: {k.registers} regs, {k.shared_bytes} B smem, "
                f"{k.spill_stores_bytes} B spill stores"
            )
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
    if r.speedup.eager is not None:
        comp = f"{r.speedup.compile:.2f}x" if r.speedup.compile is not None else "—"
        lines.append(f"speedup: {r.speedup.eager:.2f}x vs eager, {comp} vs torch.compile")
    if r.provenance:
        p = r.provenance
        lines.append(f"device: {p.device_name} ({p.device}), torch {p.torch_version}")
    return "\n".join(lines)
