"""Eager baseline timing on a GPU, side by side in one process: the judge's timed reference call
(`call_reference`), the old synchronising one (`run_reference`), a bare `torch.relu`, and
`triton.testing.do_bench`, for a small (16x4096) and a medium (5120x4096) ReLU; then the judge's own eager
baseline from evaluations (with and without the spare runner), and the direct timings again.

    python3 -m bench.eager_probe     (a GPU machine; output in docs/results/h200-2026-12-04-probe/)
"""

from __future__ import annotations

import re
from pathlib import Path

import torch
import triton.testing

from evalsvc.cli_files import read_solution
from evalsvc.core.options import EvalOptions
from evalsvc.core.tasks import TaskSpec
from evalsvc.engine.baseline_timing import call_reference, run_reference
from evalsvc.engine.timing import TimingPolicy, measure, rotating
from evalsvc.settings import Settings
from evalsvc.suite import EXAMPLES
from evalsvc.wiring import make_local_pipeline

dev = torch.device("cuda")


class M(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def direct(tag: str) -> None:
    m = M().to(dev)
    for rows in (16, 5120):
        pool = [[torch.randn(rows, 4096, device=dev)] for _ in range(4)]
        pol, sets = TimingPolicy(), rotating(pool)
        r = {
            "call_reference": measure(lambda *a: call_reference(m, list(a)), sets, dev, pol).stats,
            "run_reference_sync": measure(lambda *a: run_reference(m, list(a), dev), sets, dev, pol).stats,
            "torch_relu": measure(lambda x: torch.relu(x), sets, dev, pol).stats,
        }
        out = {k: (round(v.median_ms * 1e3, 2), v.n) for k, v in r.items()}
        out["do_bench_us"] = round(triton.testing.do_bench(lambda p=pool: m(p[0][0])) * 1e3, 2)
        print(tag, rows, out, flush=True)


def main() -> None:
    direct("fresh process")
    settings = Settings(device="cuda", data_dir=Path("/tmp/probe-data"), compile_backend="process")
    pipe = make_local_pipeline(settings, with_pch=False)
    src = (EXAMPLES / "l1/relu/task.py").read_text()
    src = re.sub(r"^ROWS = \d+", "ROWS = 16", src, flags=re.M)
    spec = TaskSpec(source=src, name="relu_16x4096")
    sol = read_solution(EXAMPLES / "l1/relu/cuda_ok.py")
    for keep in (True, False):
        pipe.evaluator.judge.launcher.keep_spare = keep
        for budget in (5.0, 5.001, 5.002):
            r = pipe.evaluate(spec, sol, EvalOptions(compile_baseline=False, timing_budget_s=budget))
            t = r.timings
            if t.candidate is None or t.eager is None:
                print("evaluation", r.status.value, (r.message or "")[:800], flush=True)
                continue
            print(
                "judge spare" if keep else "judge no spare",
                r.status.value,
                "cand us",
                round(t.candidate.median_ms * 1e3, 2),
                "eager us",
                round(t.eager.median_ms * 1e3, 2),
                "eager n",
                t.eager.n,
                "cached",
                t.eager_cached,
                flush=True,
            )
        direct("after evaluations, spare alive" if keep else "after evaluations")
    pipe.evaluator.judge.close()
    direct("after closing the spare")


if __name__ == "__main__":
    main()
