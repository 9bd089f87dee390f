"""Timing fidelity, in one run: the same kernel timed by repeated evaluations (spread of their medians),
and against two independent measurements of the same kernel: `triton.testing.do_bench` (CUDA events,
L2 cleared, median) in this process, and Nsight Compute's `gpu__time_duration.sum` (kernel only).

    python -m bench.timing_fidelity --device cuda --out OUTDIR --repeats 5

Subjects: the bundled ReLU kernel (evalsvc/examples/l1/relu/cuda_ok.py) on a small (~µs), a medium and a
large input, and the bundled matmul kernel (compute-bound). The eager reference is measured the same
three ways, since the judge times it with the same code as the candidate.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.report import write_report
from evalsvc.core.options import EvalOptions
from evalsvc.core.tasks import TaskSpec
from evalsvc.settings import Settings
from evalsvc.suite import EXAMPLES, cases
from evalsvc.wiring import make_local_pipeline

RELU_ROWS = {"small": 16, "medium": 5120, "large": 40960}  # x 4096 floats


def relu_task(rows: int) -> TaskSpec:
    src = (EXAMPLES / "l1/relu/task.py").read_text()
    src = re.sub(r"^ROWS = \d+", f"ROWS = {rows}", src, flags=re.M)
    return TaskSpec(source=src, name=f"relu_{rows}x4096")


def subjects(only: list[str] | None) -> list[tuple[str, TaskSpec, Path]]:
    """The kernels timed: ReLU at three sizes and the bundled matmul; `only` keeps names containing one
    of its words."""
    relu_sol = EXAMPLES / "l1/relu/cuda_ok.py"
    out = [(f"relu {size} ({rows}x4096)", relu_task(rows), relu_sol) for size, rows in RELU_ROWS.items()]
    mm = next(c for c in cases("cuda") if c.task_id == "l1/matmul" and c.expect == "ok")
    out.append(("matmul (bundled task)", mm.task(), mm.solution_path))
    return [s for s in out if not only or any(word in s[0] for word in only)]


PROBE = r"""
import json, runpy, sys, torch
from evalsvc.core.tasks import TaskSpec
from evalsvc.engine.taskload import load_task
spec = TaskSpec.model_validate_json(open(sys.argv[1]).read())
task = load_task(spec)
dev = torch.device("cuda")
inputs = task.make_inputs(1, dev)
model = task.make_model(0, dev)
sol = runpy.run_path(sys.argv[2], run_name="solution")
cand = sol["ModelNew"](*task.get_init_inputs()).to(dev)
cand.load_state_dict(model.state_dict(), strict=False)
which = sys.argv[3]
fn = (lambda: cand(*inputs)) if which == "candidate" else (lambda: model(*inputs))
with torch.no_grad():
    if len(sys.argv) > 4:  # under Nsight Compute: a few launches inside an NVTX range, each profiled
        fn()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("timed")
        for _ in range(int(sys.argv[4])):
            fn()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    else:
        from triton.testing import do_bench
        print("DO_BENCH_MS", do_bench(fn, warmup=50, rep=500, return_mode="median"))
"""


def independent(spec: TaskSpec, solution: Path, which: str, ext_dir: Path) -> dict[str, Any]:
    """do_bench and ncu of one subject, each in its own process (the extension is built once)."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        spec_file = Path(tmp) / "task.json"
        spec_file.write_text(spec.model_dump_json())
        probe = Path(tmp) / "probe.py"
        probe.write_text(PROBE)
        env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(ext_dir), TORCH_CUDA_ARCH_LIST="9.0a")
        base = [sys.executable, str(probe), str(spec_file), str(solution), which]
        try:
            done = subprocess.run(base, env=env, capture_output=True, text=True, timeout=300)
            m = re.search(r"DO_BENCH_MS (\S+)", done.stdout)
            out["do_bench_ms"] = float(m.group(1)) if m else None
            if not m:
                out["do_bench_error"] = done.stderr[-800:]
        except Exception as e:
            out["do_bench_error"] = repr(e)
        ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
        if not Path(ncu).exists():
            out["ncu_error"] = "ncu not found"
            return out
        cmd = [
            ncu,
            "--metrics",
            "gpu__time_duration.sum",
            "--csv",
            "--clock-control",
            "none",
            "--cache-control",
            "all",
            "--nvtx",
            "--nvtx-include",
            "timed/",
            *base,
            "5",
        ]
        try:
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
            out["ncu"] = parse_ncu(done.stdout)
            if not out["ncu"]:
                out["ncu_error"] = (done.stdout + done.stderr)[-800:]
        except Exception as e:
            out["ncu_error"] = repr(e)
    return out


def parse_ncu(csv_text: str) -> dict[str, float]:
    """Median gpu__time_duration per kernel name, in ms; the kernel with most time first."""
    import csv
    import io

    rows = [r for r in csv.reader(io.StringIO(csv_text)) if len(r) > 10]
    if not rows:
        return {}
    head = rows[0]
    try:
        k_name, m_name, unit, val = (
            head.index(c) for c in ("Kernel Name", "Metric Name", "Metric Unit", "Metric Value")
        )
    except ValueError:
        return {}
    per: dict[str, list[float]] = {}
    scale = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}
    for r in rows[1:]:
        if r[m_name] != "gpu__time_duration.sum":
            continue
        per.setdefault(r[k_name], []).append(float(r[val].replace(",", "")) * scale.get(r[unit], 1e-6))
    med = {k: statistics.median(v) for k, v in per.items()}
    return dict(sorted(med.items(), key=lambda kv: -kv[1]))


def _evaluations(pipe: Any, spec: TaskSpec, sol_path: Path, repeats: int) -> dict[str, Any]:
    """`repeats` evaluations of one subject: the runner's medians, the eager reference's, and the judge's
    own clock around each round (outside the runner: its figure per call, with the runner's own cost per
    call that it took off), and each evaluation's wall time."""
    from evalsvc.cli_files import read_solution

    cand, eager, graph, judged, wall = [], [], [], [], []
    for _ in range(repeats):
        started = time.monotonic()
        r = pipe.evaluate(spec, read_solution(sol_path), EvalOptions(compile_baseline=False))
        wall.append(round(time.monotonic() - started, 2))
        if r.timings.candidate is None:
            raise RuntimeError(f"{r.status.value}: {(r.message or '')[:500]}")
        cand.append(r.timings.candidate.median_ms)
        if r.timings.candidate_judged:
            judged.append(r.timings.candidate_judged.model_dump(exclude_none=True))
        eager.append(r.timings.eager.median_ms if r.timings.eager else float("nan"))
        if r.timings.candidate_graph:
            graph.append(r.timings.candidate_graph.median_ms)
    return {
        "candidate_medians_ms": cand,
        "eager_medians_ms": eager,
        "candidate_median_of_medians_ms": statistics.median(cand),
        "candidate_graph_medians_ms": graph,
        "judged": judged,
        "judged_per_call_ms": [j["per_call_ms"] for j in judged],
        "judged_overhead_ms": [j["overhead_ms"] for j in judged],
        "evaluation_wall_s": wall,
        "candidate_spread": (max(cand) - min(cand)) / statistics.fmean(cand),
        "eager_median_of_medians_ms": statistics.median(eager),
        "eager_spread": (max(eager) - min(eager)) / statistics.fmean(eager),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data-dir", type=Path, default=Path("var/bench"))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--only", nargs="*", default=None, help="subjects whose name contains one of these")
    args = ap.parse_args()
    settings = Settings(device=args.device, data_dir=args.data_dir.resolve(), compile_backend="process")
    pipe = make_local_pipeline(settings, with_pch=False)
    ext_dir = settings.data_dir / "bench-extensions"
    rows = []
    for name, spec, sol_path in subjects(args.only):
        t0 = time.monotonic()
        row: dict[str, Any] = {"subject": name}
        try:
            row.update(_evaluations(pipe, spec, sol_path, args.repeats))
        except Exception as e:
            row["error"] = repr(e)[:1500]
        for which in ("candidate", "eager"):
            ind = independent(spec, sol_path, which, ext_dir)
            row[f"{which}_independent"] = ind
            ours = row.get(f"{which}_median_of_medians_ms")
            if ours and ind.get("do_bench_ms"):
                row[f"{which}_vs_do_bench"] = ours / ind["do_bench_ms"] - 1
            if ours and ind.get("ncu"):
                row[f"{which}_vs_ncu_sum"] = ours / sum(ind["ncu"].values()) - 1
        row["bench_s"] = round(time.monotonic() - t0, 1)
        print(json.dumps(row), flush=True)
        rows.append(row)

    def pct(x: float | None) -> str:
        return "—" if x is None else f"{x * 100:+.2f}%"

    lines = [
        f"# Timing fidelity ({args.device}, {args.repeats} evaluations per subject)",
        "",
        "| subject | who | median of medians ms | spread of medians | do_bench ms | vs do_bench "
        "| ncu kernel ms | vs ncu | CUDA-graph ms (display only) | judge's clock ms per call "
        "(runner's own cost taken off) | evaluation wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        for who in ("candidate", "eager"):
            ind = r.get(f"{who}_independent", {})
            ncu_ms = sum(ind["ncu"].values()) if ind.get("ncu") else None
            spread = r.get(f"{who}_spread")
            graphs = " / ".join(f"{g:.4f}" for g in r.get("candidate_graph_medians_ms", []))
            lines.append(
                f"| {r['subject']} | {who} | {r.get(f'{who}_median_of_medians_ms', '—')} | "
                f"{'—' if spread is None else f'{spread * 100:.2f}%'} | {ind.get('do_bench_ms', '—')} | "
                f"{pct(r.get(f'{who}_vs_do_bench'))} | {ncu_ms if ncu_ms is not None else '—'} | "
                f"{pct(r.get(f'{who}_vs_ncu_sum'))} | "
                f"{graphs if who == 'candidate' else ''} | {_judged(r) if who == 'candidate' else ''} | "
                f"{' / '.join(map(str, r.get('evaluation_wall_s', []))) if who == 'candidate' else ''} |"
            )
    write_report(args.out, "timing_fidelity", rows, lines)
    return 0


def _judged(row: dict[str, Any]) -> str:
    pairs = zip(row.get("judged_per_call_ms", []), row.get("judged_overhead_ms", []), strict=False)
    return " / ".join(f"{f:.4f} (-{o:.4f})" for f, o in pairs)


if __name__ == "__main__":
    sys.exit(main())
