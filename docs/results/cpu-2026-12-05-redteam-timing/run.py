import sys, os
from pathlib import Path
from evalsvc.settings import Settings
from evalsvc.wiring import make_local_pipeline
from evalsvc.core.options import EvalOptions
from evalsvc.cli_files import read_solution, read_task
def main():
    s = Settings(device="cpu", data_dir=Path("/var/tmp/evalsvc-redteam"), compile_backend="docker", compile_timeout_s=600, runner_isolation="process", runner_call_timeout_s=30.0)
    p = make_local_pipeline(s)
    if os.environ.get("SCREENS_OFF"):
        p.compiler.screens = frozenset()
    task = read_task(Path("tests/corpus/tasks/l2/gemm_bias_relu/task.py"))
    opts = EvalOptions(trials=3, timing_budget_s=0.3, compile_baseline=False, timing_pool=2)
    r = p.evaluate(task, read_solution(Path(sys.argv[1])), opts)
    j = r.timings.candidate_judged if r.timings else None
    print(r.status.value, r.reward, (r.message or "")[:300], r.timings.candidate.median_ms if r.timings and r.timings.candidate else None, j)
    print("TIMINGS", r.timings)
if __name__ == "__main__":
    main()
