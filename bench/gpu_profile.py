"""Profiling feedback on a real GPU (issue 9): reference and candidate profiles of the bundled suite's CUDA
solutions, the profiler's top kernel against Nsight Compute's, roofline numbers next to a hand
calculation for three tasks, and the text form of one full report with its size.

    python -m bench.gpu_profile --device cuda --out OUTDIR --data-dir DIR

Every part runs in its own try/except and prints what failed; parts past the time budget are skipped
and say so. Writes gpu_profile.json and gpu_profile.md to OUTDIR.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from evalsvc.core.options import EvalOptions
from evalsvc.core.profiles import kernel_base_name
from evalsvc.settings import Settings
from evalsvc.suite import SuiteCase, cases

# The three tasks whose roofline is checked by hand: (bytes, flops) written out from their shapes (fp32).
HAND = {
    "l1/relu": ("4 B x (5120x4096 in + 5120x4096 out)", 4 * (2 * 5120 * 4096), 0),
    "l2/gemm_bias_relu": (
        "4 B x (256x1024 x + 768x1024 W + 768 b + 256x768 out); 2x256x1024x768 FLOP",
        4 * (256 * 1024 + 768 * 1024 + 768 + 256 * 768),
        2 * 256 * 1024 * 768,
    ),
    "l1/matmul": ("4 B x (3 x 512x512); 2x512^3 FLOP", 4 * 3 * 512 * 512, 2 * 512**3),
}
DATASHEET_H200 = "H200 datasheet: 4.8 TB/s HBM3e, 67 TFLOP/s FP32, 495 TFLOP/s TF32 and 989 BF16 (dense)"


class Run:
    """Parts of the run, each isolated, with a shared deadline."""

    def __init__(self, budget_s: float) -> None:
        self.t0 = time.monotonic()
        self.budget_s = budget_s
        self.out: dict[str, Any] = {"errors": {}, "skipped": []}
        self.attempted: set[str] = set()
        self.md: list[str] = []

    def left(self) -> float:
        return self.budget_s - (time.monotonic() - self.t0)

    def part(self, name: str, fn: Callable[[], Any], need_s: float | None = None) -> Any:
        """Run one part; one that needs `need_s` seconds is skipped when fewer are left (None: instant)."""
        self.attempted.add(name)
        if need_s is not None and self.left() < need_s:
            print(f"--- {name}: skipped, {self.left():.0f} s left of the budget", flush=True)
            self.out["skipped"].append(name)
            return None
        print(f"--- {name} ({time.monotonic() - self.t0:.0f} s)", flush=True)
        try:
            return fn()
        except Exception as e:
            tb = traceback.format_exc()
            print(f"!!! {name} failed: {type(e).__name__}: {e}\n{tb}", flush=True)
            self.out["errors"][name] = f"{type(e).__name__}: {e}"
            return None

    def say(self, line: str = "") -> None:
        print(line, flush=True)
        self.md.append(line)


def ncu_reference_target(task_id: str, device: str) -> None:
    """The process ncu starts for a reference: the task's eager model, twice (trusted code)."""
    import torch

    from evalsvc.engine.taskload import load_task

    case = next(c for c in cases("cuda") if c.task_id == task_id)
    task = load_task(case.task())
    dev, cpu = torch.device(device), torch.device("cpu")
    # made on the host and copied over, so no initialisation or random-number kernel is profiled
    model = task.make_model(1, cpu).to(dev)
    inputs = [a.to(dev) if isinstance(a, torch.Tensor) else a for a in task.make_inputs(1, cpu)]
    with torch.no_grad():
        for _ in range(2):
            model(*inputs)
    torch.cuda.synchronize(dev)


def ncu_reference(ncu: str, task_id: str, device: str) -> list[Any]:
    from evalsvc.engine.ncu import METRICS, parse_ncu_csv

    cmd = [
        ncu, "--csv", "--page", "raw", "--print-units", "base", "--launch-count", "20",
        "--metrics", ",".join(METRICS),
        sys.executable, "-m", "bench.gpu_profile",
        "--ncu-reference", task_id, "--device", device, "--out", "/tmp",
    ]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=os.environ)
    kernels = parse_ncu_csv(run.stdout)
    if not kernels:
        raise RuntimeError(f"ncu gave no kernels (exit {run.returncode}): {(run.stdout + run.stderr)[-800:]}")
    return kernels


def top_by_profiler(kernels: list[Any]) -> str | None:
    return kernels[0].name if kernels else None


def same_kernel(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and kernel_base_name(a) == kernel_base_name(b)


def main() -> int:  # noqa: C901 - one linear script of independent parts
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data-dir", type=Path, default=Path("var/bench"))
    ap.add_argument("--budget", type=float, default=220.0, help="seconds for all parts together")
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument(
        "--only", nargs="*", default=None, help="task ids (default: every task with a CUDA solution)"
    )
    ap.add_argument("--references-only", action="store_true", help="no candidates (and nothing to compile)")
    ap.add_argument("--ncu-reference", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ncu_reference:
        ncu_reference_target(args.ncu_reference, args.device)
        return 0

    run = Run(args.budget)
    settings = Settings(
        device=args.device, data_dir=args.data_dir.resolve(), compile_backend="process", profile_ncu=True
    )
    state: dict[str, Any] = {}

    def facts() -> None:
        from evalsvc.engine.hardware import device_facts
        from evalsvc.engine.ncu import find_ncu
        from evalsvc.render import render_devices

        f = device_facts(settings.device, settings.cuda_arch)
        state["facts"] = f
        state["ncu"] = find_ncu(settings.cuda_home)
        run.out["device_facts"] = f.model_dump()
        run.say("## Device facts (measured once per worker, published at /v1/devices)\n")
        run.say("```\n" + render_devices([("this worker", f)]) + "\n```")
        run.say(f"{DATASHEET_H200}. ncu: {state['ncu'] or 'not found'}\n")

    def build() -> None:
        from evalsvc.wiring import make_local_pipeline

        pipe = make_local_pipeline(settings, with_pch=False)
        if pipe.evaluator.judge.ncu is not None:  # a shorter leash than a worker's, for the time budget
            pipe.evaluator.judge.ncu = dataclasses.replace(pipe.evaluator.judge.ncu, timeout_s=45.0)
        state["pipe"] = pipe
        kind = "cuda" if args.device.startswith("cuda") else "cpu"  # cpu: a smoke run of the script itself
        selected = [c for c in cases(kind) if c.expect == "ok" and (not args.only or c.task_id in args.only)]
        first = [c for c in selected if c.task_id in HAND] + [c for c in selected if c.task_id not in HAND]
        if args.references_only:
            state["cases"] = first
            return
        with ThreadPoolExecutor(args.jobs) as pool:
            outcomes = list(pool.map(lambda c: pipe.compiler.compile(c.solution()), first))
        state["cases"] = [c for c, o in zip(first, outcomes, strict=True) if o.status.value == "ok"]
        run.say(f"compiled {len(first)} CUDA solutions, {len(state['cases'])} ok\n")

    run.part("device facts", facts, need_s=0)
    run.part("compile", build, need_s=0)
    rows: list[dict[str, Any]] = []
    run.out["rows"] = rows

    def candidate(case: SuiteCase) -> None:
        if args.references_only:
            return
        pipe = state["pipe"]
        opts = EvalOptions(trials=2, timing_budget_s=0.5, timing_pool=2, compile_baseline=False, profile=True)
        r = pipe.evaluate(case.task(), case.solution(), opts)
        prof = r.profile
        trace = prof.trace if prof else None
        row: dict[str, Any] = {
            "solution": case.name,
            "status": r.status.value,
            "median_ms": r.timings.candidate.median_ms if r.timings.candidate else None,
            "roofline": r.roofline.model_dump() if r.roofline else None,
            "profile": prof.model_dump() if prof else None,
            "top_profiler": top_by_profiler(trace.kernels) if trace else None,
            "top_ncu": prof.ncu[0].name if prof and prof.ncu else None,
            "notes": prof.notes if prof else [],
        }
        row["match"] = same_kernel(row["top_profiler"], row.get("top_ncu"))
        rows.append(row)
        if case.task_id == "l2/gemm_bias_relu" and "full_text" not in state:
            from evalsvc.render import render_result

            state["full_text"] = render_result(r)
        print(json.dumps({k: row[k] for k in ("solution", "status", "median_ms", "top_profiler", "top_ncu")}))
        if prof:
            print("\n".join(str(n) for n in prof.notes))

    def reference(case: SuiteCase, with_compile: bool) -> None:
        from evalsvc.engine.reference_profile import profile_reference
        from evalsvc.render import render_reference_profile

        p = profile_reference(case.task(), settings.device, compile_baseline=with_compile)
        run.out.setdefault("reference", {})[case.task_id] = p.model_dump()
        text = render_reference_profile(p)
        state.setdefault("ref_text", {})[case.task_id] = text
        ref_top = top_by_profiler(p.eager.kernels)
        entry = {"task": case.task_id, "top_profiler": ref_top}
        if state.get("ncu"):
            nk = ncu_reference(state["ncu"], case.task_id, settings.device)
            entry.update(
                top_ncu=nk[0].name, ncu=[k.model_dump() for k in nk], match=same_kernel(ref_top, nk[0].name)
            )
        run.out.setdefault("reference_check", []).append(entry)
        print(text)
        print(json.dumps(entry)[:600])

    def hand(case: SuiteCase) -> None:
        f = state["facts"]
        row = next(r for r in rows if r["solution"] == case.name)
        roof = row["roofline"]
        how, hb, hf = HAND[case.task_id]
        bw, peak = f.peak_bandwidth_bps, roof["peak_flops"]
        med = row["median_ms"]
        hand_floor_ms = max(hb / bw, hf / peak) * 1e3
        hand_bw_pct = 100 * hb / (med / 1e3) / bw
        hand_c_pct = 100 * hf / (med / 1e3) / peak
        ok = all(
            abs(a - b) <= 0.10 * max(abs(b), 1e-12)
            for a, b in (
                (roof["min_bytes"], hb),
                (roof["flops"], hf),
                (roof["floor_ms"], hand_floor_ms),
                (roof["bandwidth_pct"], hand_bw_pct),
            )
        )
        run.out.setdefault("hand_check", []).append(
            {"task": case.task_id, "service": roof, "hand_bytes": hb, "hand_flops": hf, "within_10pct": ok}
        )
        run.say(f"### {case.task_id}: {roof['verdict']}\n")
        run.say(f"- hand: {how} = {hb:,} B, {hf:,} FLOP")
        run.say(f"- service: {roof['min_bytes']:,} B, {roof['flops']:,} FLOP; bound {roof['bound']}")
        run.say(
            f"- floor: service {roof['floor_ms'] * 1e3:.2f} µs, "
            f"hand max({hb:,}/{bw:.4g}, {hf:,}/{peak:.4g}) = "
            f"{hand_floor_ms * 1e3:.2f} µs"
        )
        run.say(
            f"- at the candidate's {med * 1e3:.2f} µs: service {roof['bandwidth_pct']:.1f}% bandwidth / "
            f"{roof['compute_pct']:.1f}% compute; hand {hand_bw_pct:.1f}% / {hand_c_pct:.1f}%"
        )
        run.say(f"- within 10%: {ok}\n")

    todo = state.get("cases", [])
    firsts: list[SuiteCase] = []  # one solution per hand-checked task
    for c in todo:
        if c.task_id in HAND and all(f.task_id != c.task_id for f in firsts):
            firsts.append(c)
    run.say("## Candidate profiles, roofline and the hand check\n")
    for case in firsts:
        run.part(f"candidate {case.name}", lambda c=case: candidate(c), need_s=20)
        if any(r["solution"] == case.name and r["roofline"] for r in rows):
            run.part(f"hand roofline {case.task_id}", lambda c=case: hand(c))
    run.say("## Reference profiles (eager + torch.compile), top kernel against Nsight Compute\n")
    for case in firsts:  # torch.compile's kernels for one task (compiling is slow)
        with_compile = case.task_id == "l2/gemm_bias_relu"
        run.part(f"reference {case.task_id}", lambda c=case, w=with_compile: reference(c, w), need_s=30)

    def full_text() -> None:
        text = state["full_text"]
        run.out["full_text"] = text
        run.say("## Text form of one full report (l2/gemm_bias_relu, profiled)\n")
        run.say("```\n" + text + "\n```")
        run.say(f"{len(text)} characters, about {len(text) // 4} tokens at 4 characters per token\n")
        ref = state.get("ref_text", {}).get("l2/gemm_bias_relu")
        if ref:
            run.say("```\n" + ref + "\n```")
            run.say(f"reference profile: {len(ref)} characters, about {len(ref) // 4} tokens\n")

    if "full_text" in state:
        run.part("full text report", full_text)
    for case in todo:
        if f"candidate {case.name}" not in run.attempted:
            run.part(f"candidate {case.name}", lambda c=case: candidate(c), need_s=20)
    for case in todo:
        if f"reference {case.task_id}" not in run.attempted:
            run.part(f"reference {case.task_id}", lambda c=case: reference(c, False), need_s=15)

    run.say("## Top kernel: profiler against Nsight Compute\n")
    run.say("| what | profiler's top kernel | Nsight Compute's top kernel | match | notes |")
    run.say("|---|---|---|---|---|")
    for r in rows:
        notes = "; ".join(r["notes"])[:160]
        run.say(f"| {r['solution']} | {r['top_profiler']} | {r.get('top_ncu')} | {r['match']} | {notes} |")
    for e in run.out.get("reference_check", []):
        run.say(f"| reference {e['task']} | {e['top_profiler']} | {e.get('top_ncu')} | {e.get('match')} | |")
    run.say(
        f"\ntotal {time.monotonic() - run.t0:.0f} s; errors: {list(run.out['errors']) or 'none'}; "
        f"skipped: {run.out['skipped'] or 'none'}"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_profile.json").write_text(json.dumps(run.out, indent=1, default=str))
    (args.out / "gpu_profile.md").write_text("\n".join(run.md) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
