"""Compile speed, side by side in one run: plain `load_inline` against the compile stage on the same
sources and machine (cold, then a cache hit), and compile throughput with N parallel builds.

    python -m bench.compile_speed --out docs/results/compile-cpu --only l1/relu/cpu_ok.py l1/relu/cuda_ok.py

Cold builds side by side (issue 28): per solution a cold build on the fast path (built against the torch
stand-in, the load_inline calls read from the text where they can be: evalsvc.compiler.fast_path,
evalsvc.compiler.static_capture) and a cold full build, each with an empty store,
timed in wall seconds and in CPU-seconds (user + sys of the whole build tree: every process the compile
stage waited for, from `resource.getrusage(RUSAGE_CHILDREN)`; it counts only with `--backend process`,
where the sandboxes are this process's children, not Docker's). `--cold-only` runs just these.

Plain `load_inline` runs as a user would: a fresh Python process, a fresh TORCH_EXTENSIONS_DIR, MAX_JOBS
equal to the sandbox's CPU count, the same CUDA target. It is timed from after `import torch`. The stage
is timed around `Compiler.compile` with an empty artifact store (container start, capture, build, screens,
filing included); the precompiled headers are built first and their one-time cost reported apart.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from evalsvc.core.solutions import Solution, SolutionFormat
from evalsvc.settings import Settings
from evalsvc.store.artifacts import LocalArtifactStore
from evalsvc.suite import cases
from evalsvc.wiring import make_compiler

PLAIN_DRIVER = r"""
import runpy, sys, time
import torch
t0 = time.perf_counter()
runpy.run_path(sys.argv[1], run_name="solution")
print("PLAIN_SECONDS", time.perf_counter() - t0)
"""


def plain_load_inline(path: Path, settings: Settings) -> float:
    """Seconds that `load_inline` takes at import of the solution file, in a fresh process."""
    arch = settings.cuda_arch
    with tempfile.TemporaryDirectory(prefix="plain-ext-") as ext:
        env = dict(
            os.environ,
            TORCH_EXTENSIONS_DIR=ext,
            MAX_JOBS=str(max(1, int(settings.compile_cpus))),
            CUDA_HOME=settings.cuda_home,
            TORCH_CUDA_ARCH_LIST=f"{arch[0]}.{arch[1:]}",
        )
        done = subprocess.run(
            [sys.executable, "-c", PLAIN_DRIVER, str(path)],
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
            cwd=ext,
        )
    for line in done.stdout.splitlines():
        if line.startswith("PLAIN_SECONDS"):
            return float(line.split()[1])
    raise RuntimeError(f"plain load_inline of {path} failed: {done.stderr[-1500:]}")


def children_cpu_s() -> float:
    """CPU-seconds (user + sys) of every child process this one has waited for so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cold_build(settings: Settings, solution: Solution, fast_path: bool) -> dict[str, object]:
    """One cold compile (empty artifact store): status, wall, CPU-seconds of its tree, the path taken."""
    with tempfile.TemporaryDirectory(prefix="bench-store-") as store_dir:
        compiler = make_compiler(settings, LocalArtifactStore(Path(store_dir)), with_pch=True)
        compiler.fast_path = fast_path
        cpu, t = children_cpu_s(), time.monotonic()
        outcome = compiler.compile(solution)
        wall, cpu = time.monotonic() - t, children_cpu_s() - cpu
    return {
        "status": outcome.status.value,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "fast_path": outcome.report.fast_path,
        "fast_path_reason": outcome.report.fast_path_reason,
    }


def cold_rows(
    settings: Settings, selected: list, out: Path, full_build: bool = True
) -> list[dict[str, object]]:
    """Per solution: a cold build on the fast path and a cold full build, side by side."""
    rows = []
    for case in selected:
        fast = cold_build(settings, case.solution(), fast_path=True)
        skipped = {"status": "-", "cpu_s": None, "wall_s": None}
        full = cold_build(settings, case.solution(), fast_path=False) if full_build else skipped
        row = {
            "solution": case.name,
            "device": case.device,
            "status": fast["status"],
            "full_status": full["status"],
            "cold_cpu_s": fast["cpu_s"],
            "full_cpu_s": full["cpu_s"],
            "fast_path": fast["fast_path"],
            "fast_path_reason": fast["fast_path_reason"],
            "cold_s": fast["wall_s"],
            "full_s": full["wall_s"],
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    cpu = [float(r["cold_cpu_s"]) for r in rows]
    full_cpu = [float(r["full_cpu_s"]) for r in rows if r["full_cpu_s"] is not None]
    summary = {
        "median_cold_cpu_s": statistics.median(cpu) if cpu else None,
        "median_full_cpu_s": statistics.median(full_cpu) if full_cpu else None,
        "fast_path_share": sum(bool(r["fast_path"]) for r in rows) / len(rows) if rows else None,
    }
    lines = [
        f"# Cold builds, fast path and full ({os.uname().nodename}, {os.cpu_count()} CPUs, "
        f"sandbox cpus {settings.compile_cpus:g}, backend {settings.compile_backend.value})",
        "",
        "| solution | status | fast_path | cold CPU-s (fast) | full CPU-s | cold s (fast) | full s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['solution']} | {r['status']}/{r['full_status']} | {r['fast_path']} | {r['cold_cpu_s']} "
            f"| {r['full_cpu_s']} | {r['cold_s']} | {r['full_s']} |"
        )
    lines += ["", json.dumps(summary)]
    text = "\n".join(lines) + "\n"
    print(text)
    (out / "compile_speed_cold.md").write_text(text)
    (out / "compile_speed.json").write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
    return rows


def with_nonce(solution: Solution, nonce: str) -> Solution:
    """The same solution with a comment added: a different content hash, so a real (cold) build."""
    files = dict(solution.files)
    files[solution.entry] = files[solution.entry] + f"\n# bench nonce {nonce}\n"
    return Solution(format=solution.format, files=files)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data-dir", type=Path, default=Path("/var/tmp/evalsvc-bench"))
    ap.add_argument("--backend", default="docker", choices=["docker", "process"])
    ap.add_argument(
        "--only", nargs="*", help="solution paths under evalsvc/examples (default: all load_inline)"
    )
    ap.add_argument("--device", default=None, help="only solutions for this device kind (cpu or cuda)")
    ap.add_argument("--parallel", type=int, nargs="*", default=[1, 2], help="N for the throughput part")
    ap.add_argument("--throughput-builds", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=1800, help="compile timeout of the stage, s")
    ap.add_argument(
        "--cold-only", action="store_true", help="only the cold builds, fast path and full side by side"
    )
    ap.add_argument("--fast-only", action="store_true", help="only the cold builds on the fast path")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    # Its own owner name: the Docker sandbox reaps leftover containers of its owner at start.
    settings = Settings(
        data_dir=args.data_dir.resolve(),
        compile_backend=args.backend,
        worker_name="bench-compile-speed",
        compile_timeout_s=args.timeout,
    )
    settings.data_dir.mkdir(parents=True, exist_ok=True)

    t0 = time.monotonic()
    make_compiler(settings, LocalArtifactStore(settings.artifact_dir), with_pch=True)
    pch_s = time.monotonic() - t0
    print(f"compiler ready (precompiled headers present or built) in {pch_s:.1f} s", flush=True)

    selected = [
        c
        for c in cases(args.device)
        if c.expect == "ok"
        and c.solution().format is SolutionFormat.KERNELBENCH
        and (not args.only or c.name in args.only)
    ]
    if args.cold_only or args.fast_only:
        cold_rows(settings, selected, args.out, full_build=not args.fast_only)
        return 0
    rows = []
    for case in selected:
        with tempfile.TemporaryDirectory(prefix="bench-store-") as store_dir:
            compiler = make_compiler(settings, LocalArtifactStore(Path(store_dir)), with_pch=True)
            solution = case.solution()
            t = time.monotonic()
            cold = compiler.compile(solution)
            cold_s = time.monotonic() - t
            warm_times = []
            for _ in range(5):
                t = time.monotonic()
                warm = compiler.compile(solution)
                warm_times.append(time.monotonic() - t)
            plain_s = plain_load_inline(case.solution_path, settings)
        row = {
            "solution": case.name,
            "device": case.device,
            "status": cold.status.value,
            "plain_load_inline_s": round(plain_s, 2),
            "stage_cold_s": round(cold_s, 2),
            "cold_ratio": round(cold_s / plain_s, 3),
            "cache_hit_ms_median": round(statistics.median(warm_times) * 1e3, 1),
            "cache_hit_status": warm.status.value,
        }
        print(json.dumps(row), flush=True)
        rows.append(row)

    throughput = []
    pool_cases = [c for c in selected if c.device == "cpu"] or selected
    for n in args.parallel:
        with tempfile.TemporaryDirectory(prefix="bench-store-") as store_dir:
            compiler = make_compiler(settings, LocalArtifactStore(Path(store_dir)), with_pch=True)
            jobs = [
                with_nonce(pool_cases[i % len(pool_cases)].solution(), f"{n}-{i}-{time.time_ns()}")
                for i in range(args.throughput_builds)
            ]
            t = time.monotonic()
            with ThreadPoolExecutor(n) as ex:
                outs = list(ex.map(compiler.compile, jobs))
            wall = time.monotonic() - t
        ok = sum(o.status.value == "ok" for o in outs)
        entry = {
            "parallel": n,
            "builds": len(jobs),
            "ok": ok,
            "wall_s": round(wall, 1),
            "builds_per_min": round(60 * len(jobs) / wall, 2),
        }
        print(json.dumps(entry), flush=True)
        throughput.append(entry)

    lines = [
        f"# Compile speed ({os.uname().nodename}, {os.cpu_count()} CPUs, backend {args.backend}, "
        f"sandbox cpus {settings.compile_cpus:g})",
        "",
        f"Precompiled headers ready in {pch_s:.1f} s (one-time per toolchain; 0 when already built).",
        "",
        "| solution | status | plain load_inline s | stage cold s | cold / plain "
        "| cache hit ms (median of 5) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['solution']} | {r['status']} | {r['plain_load_inline_s']} | {r['stage_cold_s']} "
            f"| {r['cold_ratio']} | {r['cache_hit_ms_median']} |"
        )
    lines += ["", "| parallel builds | builds | ok | wall s | builds/min |", "|---|---|---|---|---|"]
    for e in throughput:
        lines.append(
            f"| {e['parallel']} | {e['builds']} | {e['ok']} | {e['wall_s']} | {e['builds_per_min']} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    (args.out / "compile_speed.md").write_text(text)
    (args.out / "compile_speed.json").write_text(
        json.dumps({"pch_ready_s": pch_s, "rows": rows, "throughput": throughput}, indent=1)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
