"""GPU worker throughput, per-evaluation overhead and GPU busy fraction over a batch, in one run.

    python -m bench.gpu_worker --device cuda --out OUTDIR --evals 64

The honest CUDA solutions of the bundled suite are compiled first (content-addressed, so a second run hits
the cache), then every solution is evaluated once (its verdict, speedups and the cold cost of a task's
first evaluation: torch.compile and eager baselines measured and cached, as a worker does on its first
job of a task); that warm-up is reported on its own.
Then `--evals` evaluations cycle through the solutions at the default options, as the GPU worker runs
them (the same Evaluator the Celery task calls; no queue). NVML is sampled every 20 ms meanwhile.

The batch runs twice: `--evals` evaluations with the default spare runners (two started ahead after
each evaluation, so each one's isolation, CUDA context and imports overlap the evaluation before it is
used; see `RunnerLauncher`), then `--compare-evals` with every runner started on demand.

Overhead of one evaluation = its wall time minus the GPU time its trials need: the timed calls (median x
count) of the candidate and of any baseline measured in it, and one candidate and one reference call per
correctness trial. Time inside the judge is also split by phase (runner start, load, trials, timing,
baselines, task checks) by wrapping the judge's methods.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from evalsvc.core.options import EvalOptions
from evalsvc.core.results import EvaluationResult
from evalsvc.settings import Settings
from evalsvc.suite import cases
from evalsvc.wiring import make_local_pipeline


class NvmlSampler:
    """GPU utilisation ('a kernel was running') sampled in a thread."""

    def __init__(self, index: int, period_s: float = 0.02) -> None:
        self.samples: list[int] = []
        self.period_s = period_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._h = pynvml.nvmlDeviceGetHandleByIndex(index)
            self._nvml = pynvml
        except Exception as e:  # no NVML: the busy fraction is reported as unknown
            print(f"NVML unavailable: {e}")
            self._nvml = None

    def __enter__(self) -> NvmlSampler:
        if self._nvml is not None:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.samples.append(self._nvml.nvmlDeviceGetUtilizationRates(self._h).gpu)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()

    @property
    def busy(self) -> float | None:
        return statistics.fmean(self.samples) / 100 if self.samples else None


def required_gpu_ms(r: EvaluationResult) -> float:
    """GPU time the evaluation's trials need by themselves (see the module docstring)."""
    t = r.timings
    total = 0.0
    if t.candidate:
        total += t.candidate.median_ms * (t.candidate.n + 3)  # + warm-up calls
    if not t.baseline_cached:
        for s in (t.eager, t.compiled):
            if s:
                total += s.median_ms * (s.n + 3)
    trials = len(r.correctness.trials) if r.correctness else 0
    per_trial = (t.candidate.median_ms if t.candidate else 0) + (t.eager.median_ms if t.eager else 0)
    return total + trials * per_trial


def phase_timer(judge: Any) -> dict[str, float]:
    """Wrap the judge's phases on this instance; returns the dict the seconds accumulate in."""
    acc: dict[str, float] = defaultdict(float)

    def wrap(obj: Any, name: str, label: str) -> None:
        fn = getattr(obj, name)

        @functools.wraps(fn)
        def timed(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                acc[label] += time.perf_counter() - t

        setattr(obj, name, timed)

    wrap(judge.launcher, "start", "runner start")
    wrap(judge.launcher, "settle", "spare start wait (before timing)")
    for name, label in (
        ("_runner_ready", "runner ready wait"),
        ("_load", "candidate load"),
        ("_trial", "correctness trials"),
        ("_time_candidate", "candidate timing"),
        ("_baselines", "baselines"),
        ("_task_quality", "task checks"),
        ("_implausible", "plausibility"),
    ):
        wrap(judge, name, label)
    # inside those phases: the runner's answer time per message kind, and the judge's own work
    ask = judge._ask

    def timed_ask(handle: Any, msg: dict[str, Any], timeout_s: float, reply_bytes: int = 0) -> dict[str, Any]:
        t = time.perf_counter()
        try:
            return ask(handle, msg, timeout_s, reply_bytes)
        finally:
            acc[f"(runner answers '{msg['op']}')"] += time.perf_counter() - t

    judge._ask = timed_ask
    wrap(judge, "_reference", "(reference calls)")
    wrap(judge, "_check", "(output comparisons)")
    return acc


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data-dir", type=Path, default=Path("var/bench"))
    ap.add_argument("--evals", type=int, default=64)
    ap.add_argument("--compare-evals", type=int, default=16, help="batch without the spare runner")
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--limit", type=int, default=None, help="only the first N honest solutions")
    args = ap.parse_args()
    kind = "cuda" if args.device.startswith("cuda") else "cpu"
    settings = Settings(device=args.device, data_dir=args.data_dir.resolve(), compile_backend="process")
    pipe = make_local_pipeline(settings, with_pch=False)
    honest = [c for c in cases(kind) if c.expect == "ok"][: args.limit]
    t0 = time.monotonic()
    with ThreadPoolExecutor(args.jobs) as pool:
        outcomes = list(pool.map(lambda c: pipe.compiler.compile(c.solution()), honest))
    print(f"compiled {len(honest)} solutions in {time.monotonic() - t0:.1f} s", flush=True)
    for c, o in zip(honest, outcomes, strict=True):
        light = o.report.light_headers if o.report else None
        took = o.report.duration_s if o.report else None
        print(f"  {c.name}: {o.status.value} light_headers={light} build_s={took}", flush=True)
    ready = [(c, o) for c, o in zip(honest, outcomes, strict=True) if o.artifact_key]
    evaluator = pipe.evaluator
    phases = phase_timer(evaluator.judge)
    evaluator.judge.launcher.keep_spare = False  # warm-up and the comparison batch start runners cold
    opts = EvalOptions()

    warm: list[dict[str, Any]] = []
    for case, outcome in ready:  # every solution once: verdicts, speedups, baselines measured and cached
        r = evaluator.evaluate(case.task(), case.solution(), outcome.artifact_key, outcome.report, opts)
        t = r.timings
        warm.append(
            {
                "solution": case.name,
                "status": r.status.value,
                "reward": r.reward,
                "candidate_ms": t.candidate.median_ms if t.candidate else None,
                "candidate_graph_ms": t.candidate_graph.median_ms if t.candidate_graph else None,
                "eager_ms": t.eager.median_ms if t.eager else None,
                "compile_ms": t.compiled.median_ms if t.compiled else None,
                "speedup_eager": r.speedup.eager,
                "speedup_compile": r.speedup.compile,
                "baseline_cached": t.baseline_cached,
                "wall_s": round(r.duration_s or 0, 2),
                "message": (r.message or "")[:1500] or None,
            }
        )
        print("warm-up", json.dumps(warm[-1]), flush=True)
    phases.clear()

    index = int(args.device.split(":")[1]) if ":" in args.device else 0

    def batch(n: int, spare: bool) -> dict[str, Any]:
        """`n` evaluations in a row; `spare`: runners are started ahead (the default), else on demand."""
        evaluator.judge.launcher.close()  # no spare carried over from the batch before
        evaluator.judge.launcher.keep_spare = spare
        phases.clear()
        per_eval = []
        t_batch = time.monotonic()
        with NvmlSampler(index) as nvml:
            for i in range(n):
                case, outcome = ready[i % len(ready)]
                before = dict(phases)
                r = evaluator.evaluate(
                    case.task(), case.solution(), outcome.artifact_key, outcome.report, opts
                )
                spent = {
                    k: round(v - before.get(k, 0.0), 3) for k, v in phases.items() if v > before.get(k, 0.0)
                }
                print(f"  {case.name}: {r.status.value} {r.duration_s:.2f} s {json.dumps(spent)}", flush=True)
                need = required_gpu_ms(r) / 1e3
                per_eval.append(
                    {
                        "solution": case.name,
                        "status": r.status.value,
                        "wall_s": r.duration_s,
                        "required_gpu_s": need,
                        "overhead_s": (r.duration_s or 0) - need,
                        "candidate_n": r.timings.candidate.n if r.timings.candidate else 0,
                        "baseline_cached": r.timings.baseline_cached,
                    }
                )
        batch_s = time.monotonic() - t_batch
        overheads = [e["overhead_s"] for e in per_eval]
        return {
            "spare_runner": spare,
            "evaluations": len(per_eval),
            "ok": sum(e["status"] == "ok" for e in per_eval),
            "batch_wall_s": round(batch_s, 2),
            "evaluations_per_gpu_hour": round(3600 * len(per_eval) / batch_s),
            "overhead_s_median": round(statistics.median(overheads), 3),
            "overhead_s_p90": round(sorted(overheads)[int(0.9 * (len(overheads) - 1))], 3),
            "wall_s_median": round(statistics.median(e["wall_s"] for e in per_eval), 3),
            "gpu_busy_fraction_nvml": None if nvml.busy is None else round(nvml.busy, 3),
            "nvml_samples": len(nvml.samples),
            "useful_gpu_fraction": round(sum(e["required_gpu_s"] for e in per_eval) / batch_s, 3),
            "phase_seconds_per_eval": {k: round(v / len(per_eval), 3) for k, v in phases.items()},
            "evals": per_eval,
        }

    main_batch = batch(args.evals, spare=True)  # first: the default, and the one that counts if cut short
    print("with spare runner", json.dumps({k: v for k, v in main_batch.items() if k != "evals"}), flush=True)
    without = batch(args.compare_evals, spare=False)
    print("without spare runner", json.dumps({k: v for k, v in without.items() if k != "evals"}), flush=True)
    summary = {"device": args.device, "batches": [without, main_batch], "warm_up": warm}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_worker.json").write_text(json.dumps(summary, indent=1))
    keys = [k for k in main_batch if k not in ("evals", "phase_seconds_per_eval", "spare_runner")]
    lines = [
        f"# GPU worker: batches of evaluations of the bundled suite ({args.device}, default options)",
        "",
        "| measure | no spare runner | spare runner (default) |",
        "|---|---|---|",
    ]
    lines += [f"| {k} | {without[k]} | {main_batch[k]} |" for k in keys]
    phase_names = sorted(set(without["phase_seconds_per_eval"]) | set(main_batch["phase_seconds_per_eval"]))
    lines += ["", "| phase (judge), s per evaluation | no spare runner | spare runner |", "|---|---|---|"]
    off, on = without["phase_seconds_per_eval"], main_batch["phase_seconds_per_eval"]
    lines += [f"| {k} | {off.get(k)} | {on.get(k)} |" for k in phase_names]
    lines += [
        "",
        "First evaluation of each solution (baselines measured unless another solution of the task came "
        "first):",
        "",
        "| solution | status | reward | candidate ms | CUDA-graph ms | eager ms | torch.compile ms "
        "| speedup eager | speedup compile | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {w['solution']} | {w['status']} | {w['reward']} | {w['candidate_ms']} "
        f"| {w['candidate_graph_ms']} | {w['eager_ms']} | {w['compile_ms']} | {w['speedup_eager']} "
        f"| {w['speedup_compile']} | {w['wall_s']} |"
        for w in warm
    ]
    text = "\n".join(lines) + "\n"
    (args.out / "gpu_worker.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
