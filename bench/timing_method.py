"""The timing method on a GPU, three questions side by side in one run (one process, no judge):

    python -m bench.timing_method --out OUTDIR [--idle-s 25] [--rounds 10]

1. **Idle**: is the first timing after the GPU sat idle slower (clocks still ramping)? A 4 µs ReLU is
   timed five times in a row after `--idle-s` of idleness, then again after the same idleness and a
   warm-up of flushes by time; a 43 µs ReLU once more cold.
2. **Calls per synchronisation**: `measure` with a device-wide sync after every call (the judge's method
   up to now) against calls queued 10 at a time, and against `triton.testing.do_bench` (median), for
   ReLUs of ~4 µs, ~43 µs and ~0.3 ms and a 4096x4096 matmul, interleaved over rounds. Also the GPU
   time of the samples over `measure`'s wall time (how busy timing keeps the device).
3. **Context creations beside timing**: a helper process forks children that create a CUDA context
   and exit ("ctx"), or also run the few kernels a runner's start runs ("ctx+kernels"), continuously;
   the 4 µs and 43 µs ReLUs are timed quiet and beside each, alternating, both methods.

`torch.relu` and `torch.mm` stand in for candidates: what is compared is the method, not a kernel.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from evalsvc.engine.timing import TimingPolicy, measure, rotating

CHURN = r"""
import os, sys, time, torch
mode_file, count_file = sys.argv[1], sys.argv[2]
starts = 0
while True:
    mode = open(mode_file).read().strip()
    if mode == "exit":
        break
    if mode == "off":
        time.sleep(0.005)
        continue
    pid = os.fork()
    if pid == 0:
        torch.empty(1, device="cuda")  # the primary context, no kernel
        if mode == "kernels":  # what a runner's start ran before the context alone
            a = torch.zeros(1024, device="cuda")
            torch.equal(a, a.clone().fill_(1.0))
        torch.cuda.synchronize()
        os._exit(0)
    os.waitpid(pid, 0)
    starts += 1
    open(count_file, "w").write(str(starts))
"""


def nvml_clock() -> int | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        return int(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))
    except Exception:
        return None


def relu_subject(rows: int) -> tuple[Any, list[list[torch.Tensor]]]:
    g = torch.Generator(device="cuda").manual_seed(rows)
    pool = [[torch.randn(rows, 4096, device="cuda", generator=g)] for _ in range(4)]
    return torch.relu, pool


def mm_subject() -> tuple[Any, list[list[torch.Tensor]]]:
    g = torch.Generator(device="cuda").manual_seed(1)
    pool = [[torch.randn(4096, 4096, device="cuda", generator=g) for _ in range(2)] for _ in range(4)]
    return torch.mm, pool


def timed(fn: Any, pool: list[list[torch.Tensor]], per_sync: int) -> dict[str, Any]:
    m = measure(fn, rotating(pool), torch.device("cuda"), TimingPolicy(calls_per_sync=per_sync))
    return {
        "median_us": m.stats.median_ms * 1e3,
        "n": m.stats.n,
        "p90_us": sorted(m.samples_ms)[int(0.9 * (len(m.samples_ms) - 1))] * 1e3,
        "wall_ms": m.wall_s * 1e3,
        "gpu_fraction": sum(m.samples_ms) / 1e3 / m.wall_s,
        "first_us": [round(x * 1e3, 2) for x in m.samples_ms[:8]],
    }


def do_bench_us(fn: Any, pool: list[list[torch.Tensor]]) -> float:
    from triton.testing import do_bench

    args = pool[0]
    return do_bench(lambda: fn(*args), warmup=25, rep=200, return_mode="median") * 1e3


def idle_test(subjects: dict[str, Any], idle_s: float) -> list[dict[str, Any]]:
    rows = []
    flush = torch.empty(64 * 1024 * 1024, device="cuda")
    for label, name, warm_ms in [("cold", "small", 0), ("warmed 50 ms", "small", 50), ("cold", "medium", 0)]:
        torch.cuda.synchronize()
        time.sleep(idle_s)
        clock_idle = nvml_clock()
        if warm_ms:
            t_end = time.perf_counter() + warm_ms / 1e3
            while time.perf_counter() < t_end:
                flush.fill_(1.0)
                torch.cuda.synchronize()
        fn, pool = subjects[name]
        runs = [timed(fn, pool, 1) for _ in range(5)]
        rows.append(
            {
                "subject": name,
                "after_idle": label,
                "sm_clock_mhz_idle": clock_idle,
                "sm_clock_mhz_after": nvml_clock(),
                "medians_us": [round(r["median_us"], 2) for r in runs],
                "first_samples_us": runs[0]["first_us"],
            }
        )
        print("idle", json.dumps(rows[-1]), flush=True)
    return rows


def method_test(subjects: dict[str, Any], rounds: int) -> dict[str, Any]:
    results: dict[str, dict[str, list[Any]]] = {
        n: {"sync1": [], "queued10": [], "do_bench": []} for n in subjects
    }
    for r in range(rounds):
        for name, (fn, pool) in subjects.items():
            order = ["sync1", "queued10", "do_bench"]
            random.Random(r).shuffle(order)
            for how in order:
                if how == "do_bench":
                    results[name][how].append(do_bench_us(fn, pool))
                else:
                    results[name][how].append(timed(fn, pool, 1 if how == "sync1" else 10))
    summary = {}
    for name, by in results.items():
        s1 = [x["median_us"] for x in by["sync1"]]
        q10 = [x["median_us"] for x in by["queued10"]]
        db = by["do_bench"]
        summary[name] = {
            "sync1_median_us": statistics.median(s1),
            "sync1_spread": (max(s1) - min(s1)) / statistics.median(s1),
            "queued10_median_us": statistics.median(q10),
            "queued10_spread": (max(q10) - min(q10)) / statistics.median(q10),
            "do_bench_median_us": statistics.median(db),
            "sync1_vs_do_bench": statistics.median(s1) / statistics.median(db) - 1,
            "queued10_vs_do_bench": statistics.median(q10) / statistics.median(db) - 1,
            "sync1_gpu_fraction": statistics.median(x["gpu_fraction"] for x in by["sync1"]),
            "queued10_gpu_fraction": statistics.median(x["gpu_fraction"] for x in by["queued10"]),
            "sync1_wall_ms": statistics.median(x["wall_ms"] for x in by["sync1"]),
            "queued10_wall_ms": statistics.median(x["wall_ms"] for x in by["queued10"]),
            "sync1_n": statistics.median(x["n"] for x in by["sync1"]),
            "queued10_n": statistics.median(x["n"] for x in by["queued10"]),
        }
        print("method", name, json.dumps(summary[name]), flush=True)
    return {"summary": summary, "raw": results}


def beside_test(subjects: dict[str, Any], rounds: int, churners: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="churn-"))
    mode = tmp / "mode"
    mode.write_text("off")
    script = tmp / "churn.py"
    script.write_text(CHURN)
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    procs = [
        subprocess.Popen([sys.executable, str(script), str(mode), str(tmp / f"count{i}")], env=env)
        for i in range(churners)
    ]

    def starts() -> int:
        files = [tmp / f"count{i}" for i in range(churners)]
        return sum(int(f.read_text() or 0) for f in files if f.exists())

    time.sleep(8)  # the helpers import torch
    data: dict[str, list[dict[str, Any]]] = {}
    counts: dict[str, int] = {"ctx": 0, "kernels": 0}
    busy_s: dict[str, float] = {"ctx": 0.0, "kernels": 0.0}
    try:
        for r in range(rounds):
            conditions = ["off", "ctx", "kernels"]
            random.Random(100 + r).shuffle(conditions)
            for cond in conditions:
                mode.write_text(cond)
                time.sleep(0.6)  # off: children in flight finish; on: steady churn
                before, t0 = starts(), time.monotonic()
                for name in ("small", "medium"):
                    fn, pool = subjects[name]
                    for per_sync in (1, 10):
                        row = timed(fn, pool, per_sync)
                        row.update(round=r, condition=cond, subject=name, per_sync=per_sync)
                        data.setdefault(f"{name}/{per_sync}/{cond}", []).append(row)
                if cond != "off":
                    counts[cond] += starts() - before
                    busy_s[cond] += time.monotonic() - t0
        mode.write_text("off")
    finally:
        mode.write_text("exit")
        for p in procs:
            p.wait(timeout=30)
    rates = {c: counts[c] / busy_s[c] if busy_s[c] else None for c in counts}
    print("beside context creations per second while timing:", rates, flush=True)
    return {"summary": beside_summary(data), "starts_per_s": rates, "raw": data}


def beside_summary(data: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    summary = {}
    for key, rows in data.items():
        meds = [x["median_us"] for x in rows]
        summary[key] = {
            "median_of_medians_us": statistics.median(meds),
            "max_median_us": max(meds),
            "min_median_us": min(meds),
            "p90_us_median": statistics.median(x["p90_us"] for x in rows),
        }
    for name in ("small", "medium"):
        for per_sync in (1, 10):
            quiet = summary[f"{name}/{per_sync}/off"]["median_of_medians_us"]
            for cond in ("ctx", "kernels"):
                summary[f"{name}/{per_sync}/{cond}"]["vs_quiet"] = (
                    summary[f"{name}/{per_sync}/{cond}"]["median_of_medians_us"] / quiet - 1
                )
    for k, v in summary.items():
        print("beside", k, json.dumps(v), flush=True)
    return summary


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--idle-s", type=float, default=25.0)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--churners", type=int, default=2)
    ap.add_argument("--steps", nargs="+", default=["idle", "method", "beside"])
    args = ap.parse_args()
    subjects = {
        "small": relu_subject(16),
        "medium": relu_subject(5120),
        "large": relu_subject(40960),
        "matmul": mm_subject(),
    }
    torch.cuda.synchronize()
    out: dict[str, Any] = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    if "idle" in args.steps:
        out["idle"] = idle_test(subjects, args.idle_s)
    if "method" in args.steps:
        out["method"] = method_test(subjects, max(3, args.rounds // 2))
    if "beside" in args.steps:
        out["beside"] = beside_test(subjects, args.rounds, args.churners)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "timing_method.json").write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
