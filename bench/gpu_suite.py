"""Evaluate the bundled suite on one device: every solution compiled (in parallel), every honest one
evaluated twice so the two medians can be compared. Prints a markdown table, writes JSON.

    python -m bench.gpu_suite --device cuda --out OUTDIR
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.report import write_report
from evalsvc.core.options import EvalOptions
from evalsvc.settings import Settings
from evalsvc.suite import cases
from evalsvc.wiring import make_local_pipeline


def fmt(x: float | None, spec: str = ".3f") -> str:
    return "—" if x is None else format(x, spec)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data-dir", type=Path, default=Path("var/bench"))
    ap.add_argument("--budget", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=8)
    args = ap.parse_args()
    kind = "cuda" if args.device.startswith("cuda") else "cpu"
    settings = Settings(device=args.device, data_dir=args.data_dir.resolve(), compile_backend="process")
    t0 = time.monotonic()
    pipe = make_local_pipeline(settings, with_pch=False)
    selected = cases(kind)
    with ThreadPoolExecutor(args.jobs) as pool:
        outcomes = list(pool.map(lambda c: pipe.compiler.compile(c.solution()), selected))
    print(f"compiled {len(selected)} solutions in {time.monotonic() - t0:.0f} s", flush=True)
    rows = []
    for case, outcome in zip(selected, outcomes, strict=True):
        runs = []
        for _ in range(args.repeat if case.expect == "ok" else 1):
            opts = EvalOptions(timing_budget_s=args.budget, target_rel_ci=0.005)
            r = pipe.evaluate(case.task(), case.solution(), opts)
            runs.append(r)
        first = runs[0]
        meds = [r.timings.candidate.median_ms for r in runs if r.timings.candidate]
        spread = (max(meds) - min(meds)) / (sum(meds) / len(meds)) if len(meds) >= 2 else None
        t = first.timings
        row = {
            "solution": case.name,
            "expect": case.expect,
            "status": first.status.value,
            "as_expected": (first.status.value == case.expect)
            or (case.expect == "ok" and first.status.value == "ok"),
            "reward": first.reward,
            "milestone": first.milestone,
            "candidate_ms": [m for m in meds],
            "eager_ms": t.eager.median_ms if t.eager else None,
            "compile_ms": t.compiled.median_ms if t.compiled else None,
            "speedup_eager": first.speedup.eager,
            "speedup_compile": first.speedup.compile,
            "median_spread": spread,
            "compile_s": outcome.report.duration_s,
            "ptxas": [k.model_dump() for k in outcome.report.resources],
            "message": (first.message or "")[:3000],
            "provenance": first.provenance.model_dump() if first.provenance else None,
        }
        rows.append(row)
        print(
            json.dumps(
                {
                    k: row[k]
                    for k in (
                        "solution",
                        "status",
                        "reward",
                        "candidate_ms",
                        "eager_ms",
                        "compile_ms",
                        "median_spread",
                    )
                }
            ),
            flush=True,
        )
    lines = [
        "| solution | expected | status | reward | candidate ms (run 1 / run 2) | eager ms "
        "| torch.compile ms "
        "| speedup eager | speedup compile | median spread |",
        "|" + "---|" * 10,
    ]
    for r in rows:
        cand = " / ".join(f"{m:.4f}" for m in r["candidate_ms"]) or "—"
        spread = "—" if r["median_spread"] is None else f"{r['median_spread'] * 100:.2f}%"
        lines.append(
            f"| {r['solution']} | {r['expect']} | {r['status']} | {r['reward']:g} | {cand} | "
            f"{fmt(r['eager_ms'], '.4f')} | {fmt(r['compile_ms'], '.4f')} | "
            f"{fmt(r['speedup_eager'], '.2f')} | "
            f"{fmt(r['speedup_compile'], '.2f')} | {spread} |"
        )
    write_report(args.out, "suite", rows, lines)
    bad = [r["solution"] for r in rows if not r["as_expected"]]
    print(f"total {time.monotonic() - t0:.0f} s; not as expected: {bad or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
