"""Two evaluations in flight on one pipeline (one judge, one baseline cache), as a CPU worker with
`--concurrency 2` runs them (`-P threads -c 2`): B (poisoner or control) starts first, X 0.5 s later.

    python3 docs/results/cpu-2026-12-05-redteam-rewards/run_pair.py TASK B.py X.py [FOLLOWUP.py]
(FOLLOWUP: evaluated alone after both, on the same cache)
Prints RESULT lines (run.py's format) for B and X, then a SHM line (ipcs -m)."""
import json, os, subprocess, sys, threading, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))
from run import ci
from evalsvc.cli_files import read_solution, read_task
from evalsvc.core.options import EvalOptions
from evalsvc.settings import Settings
from evalsvc.wiring import make_local_pipeline


def row(name, r, secs):
    t = r.timings
    return {
        "label": os.environ.get("LABEL", ""), "solution": name, "status": r.status.value, "reward": r.reward,
        "milestone": r.milestone, "uncertain": r.uncertain, "message": (r.message or "")[:300],
        "cand": ci(t.candidate) if t else None, "eager": ci(t.eager) if t else None,
        "compiled": ci(t.compiled) if t else None, "eager_cached": getattr(t, "eager_cached", None),
        "checks": [c.model_dump() for c in t.baseline_checks] if t else None,
        "speedup": r.speedup.model_dump() if r.speedup else None, "secs": secs,
    }


def main():
    s = Settings(device="cpu", data_dir=Path("/var/tmp/evalsvc-redteam-rewards"), compile_backend="process",
                 compile_timeout_s=600, runner_isolation="process")
    p = make_local_pipeline(s)
    task = read_task(Path(sys.argv[1]))
    opts = EvalOptions(timing_budget_s=float(os.environ.get("BUDGET", "0.5")), compile_baseline=True)
    sols = {name: read_solution(Path(name)) for name in sys.argv[2:4]}
    for sol in sols.values():  # build first (cache hits later), no evaluation: the baseline cache stays empty
        o = p.compiler.compile(sol, task.meta.allow_vendor_libs)
        assert o.artifact_key, o.message
    out = {}

    def go(name):
        t0 = time.time()
        out[name] = row(Path(name).name, p.evaluate(task, sols[name], opts), round(time.time() - t0, 1))

    b, x = sys.argv[2], sys.argv[3]
    tb = threading.Thread(target=go, args=(b,)); tb.start()
    time.sleep(0.5)
    tx = threading.Thread(target=go, args=(x,)); tx.start()
    tb.join(); tx.join()
    for name in (b, x):
        print("RESULT " + json.dumps(out[name]), flush=True)
    if len(sys.argv) > 4:  # a follow-up evaluation, alone: does the cached baseline's re-check keep it?
        sols[sys.argv[4]] = read_solution(Path(sys.argv[4]))
        go(sys.argv[4])
        print("RESULT " + json.dumps(dict(out[sys.argv[4]], solution="followup-" + Path(sys.argv[4]).name)), flush=True)
    print("SHM " + subprocess.run(["ipcs", "-m"], capture_output=True, text=True).stdout.replace("\n", " | "))


if __name__ == "__main__":
    main()
