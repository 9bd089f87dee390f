"""Rewards and medians of the honest CPU solutions (the bundled suite's `cpu` cases and the honest corpus) on
the CPU-sized tasks, one after another, each evaluated `--repeats` times: run it at two commits and compare
the tables to see whether a change moved what honest kernels get.

    python -m bench.honest_rewards --out OUTDIR [--data-dir DIR] [--repeats 2]

Uses only the pipeline's public pieces and the corpus reader's `header` and `task_for` (there since
235283b), so the same file runs against older trees.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path

from bench.report import write_report
from evalsvc.cli_files import read_solution, read_task
from evalsvc.core.options import EvalOptions
from evalsvc.settings import Settings
from evalsvc.wiring import make_local_pipeline
from tests.corpus.reader import header, task_for

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "evalsvc" / "examples"
CORPUS = ROOT / "tests" / "corpus"
OPTS = EvalOptions(trials=3, timing_budget_s=0.3, compile_baseline=False, timing_pool=2)


def _task(task_id: str) -> Path:
    small = CORPUS / "tasks" / task_id / "task.py"
    return small if small.is_file() else EXAMPLES / task_id / "task.py"


def _subjects() -> list[tuple[str, Path, Path]]:
    """(name, task file or corpus entry, solution); a corpus entry names its task in its header."""
    out = []
    suite = json.loads((EXAMPLES / "suite.json").read_text())
    for t in suite["tasks"]:
        for s in t["solutions"]:
            if s["device"] == "cpu" and s["expect"] == "ok":
                out.append((s["path"], _task(t["id"]), EXAMPLES / s["path"]))
    for p in sorted((CORPUS / "honest").glob("*.py")):
        if header(p).get("device", "any") in ("any", "cpu"):
            out.append((f"honest/{p.stem}", p, p))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data-dir", type=Path, default=Path("var/bench-honest"))
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    settings = Settings(device="cpu", data_dir=args.data_dir.resolve(), compile_backend="docker")
    pipe = make_local_pipeline(settings)
    rows = []
    for name, task_path, sol_path in _subjects():
        task = task_for(task_path, "cpu") if task_path == sol_path else read_task(task_path)
        sol = read_solution(sol_path)
        for i in range(args.repeats):
            r = pipe.evaluate(task, sol, OPTS)
            t = r.timings
            rows.append(
                {
                    "name": name,
                    "repeat": i,
                    "status": r.status.value,
                    "reward": r.reward,
                    "median_ms": t.candidate.median_ms if t and t.candidate else None,
                    "eager_ms": t.eager.median_ms if t and t.eager else None,
                    "message": (r.message or "")[:200],
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    lines = [
        f"Honest CPU solutions, CPU-sized tasks, trials 3, budget 0.3 s, commit {commit.stdout.strip()}, "
        f"{time.strftime('%Y-%m-%d %H:%M')}",
        "",
        "| solution | statuses | rewards | median ms (each run) | eager ms |",
        "|---|---|---|---|---|",
    ]
    for name in dict.fromkeys(r["name"] for r in rows):
        mine = [r for r in rows if r["name"] == name]
        statuses = ", ".join(r["status"] for r in mine)
        rewards = ", ".join(str(r["reward"]) for r in mine)
        meds = ", ".join(f"{r['median_ms']:.3f}" for r in mine if r["median_ms"] is not None) or "-"
        eager = [r["eager_ms"] for r in mine if r["eager_ms"] is not None]
        lines.append(
            f"| {name} | {statuses} | {rewards} | {meds} | {statistics.median(eager) if eager else '-'} |"
        )
    write_report(args.out, "honest_rewards", rows, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
