"""Red-team driver: evaluate one or more solutions, in order, in ONE process (one judge, one baseline cache).

    python3 docs/results/cpu-2026-12-05-redteam-rewards/run.py TASK SOL1 [SOL2 ...]

Env: BUDGET (timing_budget_s, default 0.5), COMPILE (1: torch.compile baseline on, default 1),
     LABEL (prefix printed on each line).
Prints one JSON line per evaluation (prefix RESULT).
"""
import json
import os
import sys
import time
from pathlib import Path

from evalsvc.cli_files import read_solution, read_task
from evalsvc.core.options import EvalOptions
from evalsvc.settings import Settings
from evalsvc.wiring import make_local_pipeline


def ci(t):
    return None if t is None else [round(t.median_ms, 4), round(t.ci95_low_ms, 4), round(t.ci95_high_ms, 4), t.n]


def main():
    s = Settings(
        device="cpu",
        data_dir=Path("/var/tmp/evalsvc-redteam-rewards"),
        compile_backend="process",
        compile_timeout_s=600,
        runner_isolation="process",
    )
    p = make_local_pipeline(s)
    task = read_task(Path(sys.argv[1]))
    opts = EvalOptions(
        timing_budget_s=float(os.environ.get("BUDGET", "0.5")),
        compile_baseline=os.environ.get("COMPILE", "1") == "1",
    )
    for i, sol in enumerate(sys.argv[2:]):
        t0 = time.time()
        r = p.evaluate(task, read_solution(Path(sol)), opts)
        t = r.timings
        out = {
            "label": os.environ.get("LABEL", ""),
            "i": i,
            "solution": Path(sol).name,
            "status": r.status.value,
            "reward": r.reward,
            "milestone": r.milestone,
            "uncertain": r.uncertain,
            "message": (r.message or "")[:300],
            "cand": ci(t.candidate) if t else None,
            "eager": ci(t.eager) if t else None,
            "compiled": ci(t.compiled) if t else None,
            "eager_cached": getattr(t, "eager_cached", None),
            "checks": [c.model_dump() for c in t.baseline_checks] if t else None,
            "judged": t.candidate_judged.model_dump() if t and t.candidate_judged else None,
            "speedup": r.speedup.model_dump() if r.speedup else None,
            "decisions": [d.model_dump() for d in r.decisions],
            "secs": round(time.time() - t0, 1),
        }
        print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
