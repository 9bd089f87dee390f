"""GPU worker throughput, latency, overhead alone and GPU busy fraction over a batch, in one run.

    python -m bench.gpu_worker --device cuda --out OUTDIR --evals 64

The honest CUDA solutions of the bundled suite are compiled first (content-addressed, so a second run hits
the cache), then every solution is evaluated once (its verdict, speedups and the cold cost of a task's
first evaluation: torch.compile and eager baselines measured and cached, as a worker does on its first
job of a task); that warm-up is reported on its own.
Then `--evals` evaluations cycle through the solutions at the default options, as the GPU worker runs
them (the same Evaluator the Celery task calls; no queue). NVML is sampled every 20 ms meanwhile.

The batch runs once per `--batches` entry, with that many evaluations at once (a GPU worker's threads: they
share the device for untimed work and take it alone to time, `GpuSchedule`), each with the default spare
runners (two started ahead; see `RunnerLauncher`) or, for an entry written `K/cold`, with every runner
started on demand. Every batch lists its candidates' medians per solution, so that timing beside
other evaluations in flight is compared with timing one at a time, in the same run.

Overhead of one evaluation, measured only one at a time = its wall time minus the GPU time its trials
need: the timed calls (median x count) of the candidate and of any baseline measured in it, and one
candidate and one reference call per correctness trial. With several in flight the batch reports
throughput (evaluations per GPU-hour; batch wall time / count is throughput, not an overhead) and each
evaluation's latency (median, p90: it waits for the others' timings). Every evaluation's reward, milestone,
uncertain mark and baselines are recorded. Time inside the judge is also split by phase
(runner start, load, trials, timing, baselines, task checks) by wrapping the judge's methods.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import statistics
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evalsvc.core.options import EvalOptions
from evalsvc.core.results import EvaluationResult
from evalsvc.engine import judge as judge_module
from evalsvc.engine.reference import Reference
from evalsvc.engine.runner_session import RunnerSession
from evalsvc.engine.trials import Trials
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
    """Wrap the judge's phases (on this instance, its helpers, and the classes of its per-evaluation
    objects: for the whole process); returns the dict the seconds accumulate in."""
    acc: dict[str, float] = defaultdict(float)
    lock = threading.Lock()

    def add(label: str, seconds: float) -> None:
        with lock:
            acc[label] += seconds

    def wrap(obj: Any, name: str, label: str) -> None:
        fn = getattr(obj, name)

        @functools.wraps(fn)
        def timed(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                add(label, time.perf_counter() - t)

        setattr(obj, name, timed)

    wrap(judge.launcher, "start", "runner start")
    wrap(judge.tasks, "_acquire", "task process (start on first use)")
    alone, depth = judge.gpu.alone, threading.local()

    @contextmanager
    def timed_alone() -> Iterator[None]:  # the device held alone, outermost only
        with alone():
            depth.n = getattr(depth, "n", 0) + 1
            t = time.perf_counter()
            try:
                yield
            finally:
                depth.n -= 1
                if not depth.n:
                    add("device alone (timing)", time.perf_counter() - t)

    judge.gpu.alone = timed_alone
    # the judge's steps: methods of its per-evaluation objects (their classes, so every evaluation's are
    # timed), of its per-judge ones, and the functions judge.py calls
    wrap(RunnerSession, "ready", "runner ready wait")
    wrap(RunnerSession, "load", "candidate load")
    wrap(Trials, "run", "correctness trials")
    wrap(judge_module, "time_candidate_rounds", "candidate timing")
    wrap(judge.baseline_runs, "measure", "baselines")
    wrap(judge.quality, "warnings", "task checks")
    wrap(judge_module, "implausible", "plausibility")
    # inside those phases: the runner's answer time per message kind, and the judge's own work
    ask = RunnerSession.ask

    def timed_ask(
        session: RunnerSession, msg: dict[str, Any], timeout_s: float, reply_bytes: int = 0
    ) -> dict[str, Any]:
        t = time.perf_counter()
        try:
            return ask(session, msg, timeout_s, reply_bytes)
        finally:
            add(f"(runner answers '{msg['op']}')", time.perf_counter() - t)

    RunnerSession.ask = timed_ask  # type: ignore[method-assign]
    for op in ("inputs", "forward"):  # the task's process answers these, for every evaluation alike
        wrap(Reference, op, f"(task process answers '{op}')")
    wrap(Trials, "check", "(output comparisons)")
    return acc


@contextmanager
def starts_held(judge: Any) -> Iterator[None]:
    """The judge as it was before runner starts could overlap timing: an evaluation holds its device
    share while its runner starts, and every timing first waits for starting spares."""
    ready, quiet = RunnerSession.ready, judge.quiet

    def ready_in_share(session: RunnerSession) -> Any:
        with judge.gpu.shared():
            return ready(session)

    @contextmanager
    def quiet_settled() -> Iterator[None]:
        with quiet():
            judge.launcher.settle()
            yield

    RunnerSession.ready, judge.quiet = ready_in_share, quiet_settled  # type: ignore[method-assign]
    try:
        yield
    finally:
        RunnerSession.ready, judge.quiet = ready, quiet  # type: ignore[method-assign]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data-dir", type=Path, default=Path("var/bench"))
    ap.add_argument("--evals", type=int, default=64)
    ap.add_argument(
        "--batches",
        nargs="+",
        default=["4", "1", "1/cold"],
        help="per batch: evaluations in flight; '/cold': runners started on demand (no spares); '/held': "
        "runner starts kept out of timing, as before run 12; '/noyield': untimed work keeps its share until "
        "it times, as before run 13; '/graphs': CUDA-graph timing below 0.2 ms, as before run 14",
    )
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
                "milestone": r.milestone,
                "uncertain": r.uncertain,
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

    def evaluate(i: int) -> dict[str, Any]:
        case, outcome = ready[i % len(ready)]
        r = evaluator.evaluate(case.task(), case.solution(), outcome.artifact_key, outcome.report, opts)
        need = required_gpu_ms(r) / 1e3
        return {
            "solution": case.name,
            "status": r.status.value,
            "reward": r.reward,
            "milestone": r.milestone,
            "uncertain": r.uncertain,
            "eager_ms": r.timings.eager.median_ms if r.timings.eager else None,
            "compile_ms": r.timings.compiled.median_ms if r.timings.compiled else None,
            "baseline_replaced": [c.kind for c in r.timings.baseline_checks if c.replaced],
            "wall_s": r.duration_s,
            "required_gpu_s": need,
            "candidate_ms": r.timings.candidate.median_ms if r.timings.candidate else None,
            "candidate_n": r.timings.candidate.n if r.timings.candidate else 0,
            "baseline_cached": r.timings.baseline_cached,
            "message": None if r.status.value == "ok" else (r.message or "")[:300],
        }

    graph_below_ms = judge_module.GRAPH_TIMING_BELOW_MS

    def batch(n: int, spare: bool, inflight: int, held: bool, yields: bool, graphs: bool) -> dict[str, Any]:
        """`n` evaluations, `inflight` at once; `spare`: runners are started ahead (the default); `held`:
        runner starts kept out of timing (`starts_held`); `yields`: untimed work lets a waiting timing
        pass between its steps (the default); `graphs`: CUDA-graph timing below 0.2 ms, as before run 14."""
        evaluator.judge.launcher.close()  # no spare carried over from the batch before
        evaluator.judge.launcher.keep_spare = spare
        phases.clear()
        t_batch = time.monotonic()
        schedule = starts_held(evaluator.judge) if held else contextlib.nullcontext()
        if not yields:  # untimed work keeps its share to the end of its stretch, as before run 13
            evaluator.judge.gpu.let_timing_pass = lambda: None
        judge_module.GRAPH_TIMING_BELOW_MS = 0.2 if graphs else graph_below_ms
        with schedule, NvmlSampler(index) as nvml, ThreadPoolExecutor(inflight) as pool:
            per_eval = []
            for e in pool.map(evaluate, range(n)):
                print(f"  {e['solution']}: {e['status']} {e['wall_s']:.2f} s", flush=True)
                per_eval.append(e)
        batch_s = time.monotonic() - t_batch
        vars(evaluator.judge.gpu).pop("let_timing_pass", None)
        judge_module.GRAPH_TIMING_BELOW_MS = graph_below_ms
        # Alone, an evaluation's wall time less its required GPU time is its overhead; with several in flight
        # they overlap, and only throughput (batch wall time / count) and each one's latency are measured.
        overheads = [e["wall_s"] - e["required_gpu_s"] for e in per_eval] if inflight == 1 else []
        latencies = sorted(e["wall_s"] for e in per_eval)
        medians: dict[str, list[float]] = defaultdict(list)
        for e in per_eval:
            if e["candidate_ms"] is not None:
                medians[e["solution"]].append(e["candidate_ms"])
        return {
            "label": f"{inflight} in flight"
            + ("" if spare else ", no spare runner")
            + (", starts held out of timing" if held else "")
            + ("" if yields else ", shares kept to the timing")
            + (", graph timing below 0.2 ms" if graphs else ""),
            "inflight": inflight,
            "spare_runner": spare,
            "starts_held": held,
            "lets_timing_pass": yields,
            "graph_timing_below_ms": 0.2 if graphs else graph_below_ms,
            "evaluations": len(per_eval),
            "ok": sum(e["status"] == "ok" for e in per_eval),
            "batch_wall_s": round(batch_s, 2),
            "evaluations_per_gpu_hour": round(3600 * len(per_eval) / batch_s),
            "overhead_s_median_alone": round(statistics.median(overheads), 3) if overheads else None,
            "overhead_s_p90_alone": round(sorted(overheads)[int(0.9 * (len(overheads) - 1))], 3)
            if overheads
            else None,
            "batch_wall_s_per_evaluation": round(batch_s / n, 3),
            "latency_s_median": round(statistics.median(latencies), 3),
            "latency_s_p90": round(latencies[int(0.9 * (len(latencies) - 1))], 3),
            "gpu_busy_fraction_nvml": None if nvml.busy is None else round(nvml.busy, 3),
            "nvml_samples": len(nvml.samples),
            "useful_gpu_fraction": round(sum(e["required_gpu_s"] for e in per_eval) / batch_s, 3),
            "phase_seconds_per_eval": {k: round(v / len(per_eval), 3) for k, v in phases.items()},
            "candidate_median_ms": {k: statistics.median(v) for k, v in medians.items()},
            "evals": per_eval,
        }

    batches = []
    for spec in args.batches:  # the first is the one that counts if the run is cut short
        inflight, *flags = spec.split("/")
        batches.append(
            batch(
                args.evals,
                "cold" not in flags,
                int(inflight),
                "held" in flags,
                "noyield" not in flags,
                "graphs" in flags,
            )
        )
        print(
            batches[-1]["label"],
            json.dumps({k: v for k, v in batches[-1].items() if k != "evals"}),
            flush=True,
        )
    report(args.out, args.device, batches, warm)
    return 0


def report(out: Path, device: str, batches: list[dict[str, Any]], warm: list[dict[str, Any]]) -> None:
    """gpu_worker.json and the Markdown tables of the batches, side by side."""
    summary = {"device": device, "batches": batches, "warm_up": warm}
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_worker.json").write_text(json.dumps(summary, indent=1))
    skip = ("evals", "phase_seconds_per_eval", "candidate_median_ms", "label", "spare_runner")
    keys = [k for k in batches[0] if k not in skip]
    lines = [
        f"# GPU worker: batches of evaluations of the bundled suite ({device}, default options)",
        "",
        "| measure | " + " | ".join(b["label"] for b in batches) + " |",
        "|---|" + "---|" * len(batches),
    ]
    lines += [f"| {k} | " + " | ".join(str(b[k]) for b in batches) + " |" for k in keys]
    phase_names = sorted({k for b in batches for k in b["phase_seconds_per_eval"]})
    lines += ["", "| phase (judge), s per evaluation | " + " | ".join(b["label"] for b in batches) + " |"]
    lines += ["|---|" + "---|" * len(batches)]
    lines += [
        f"| {k} | " + " | ".join(str(b["phase_seconds_per_eval"].get(k)) for b in batches) + " |"
        for k in phase_names
    ]
    base = batches[-1]["candidate_median_ms"]
    lines += [
        "",
        "Candidate's median of medians per solution, ms (vs the last batch, one at a time):",
        "",
        "| solution | " + " | ".join(b["label"] for b in batches) + " |",
        "|---|" + "---|" * len(batches),
    ]
    for name in sorted(base):
        cells = []
        for b in batches:
            m = b["candidate_median_ms"].get(name)
            cells.append("" if m is None else f"{m:.5f} ({(m / base[name] - 1) * 100:+.1f}%)")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
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
    (out / "gpu_worker.md").write_text(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
