"""Does a runner starting beside a timed kernel move its timing? Side by side in one run.

    python -m bench.start_beside_timing --device cuda --out OUTDIR --repeats 6

The judge waits for every spare runner to finish its start (fork, isolation, CUDA context, imports)
before it times anything (`RunnerLauncher.settle`); on the H200 hosts that wait was 0.3-0.4 s of each
evaluation. Dropping it is safe only if a CUDA context being created in another process on the same GPU
does not move a timed kernel. Here the bundled ReLU is evaluated `--repeats` times "quiet" and as many
times "beside starts" (a thread starting and closing runners, as the launcher does, for the whole
evaluation), alternating, and the candidate's medians are compared per input size.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from bench.report import write_report
from bench.timing_fidelity import relu_task
from evalsvc.cli_files import read_solution
from evalsvc.core.options import EvalOptions
from evalsvc.engine.launcher import RunnerLauncher
from evalsvc.settings import Settings
from evalsvc.suite import EXAMPLES
from evalsvc.wiring import make_local_pipeline

SIZES = {"small": 16, "medium": 5120, "large": 40960}  # rows of 4096 floats


class StartingRunners:
    """Starts runners as the launcher does (`prestart`), waits for their ready signals (`settle`), closes
    them, again, until stopped; counts the starts."""

    def __init__(self, launcher: RunnerLauncher) -> None:
        self.launcher = launcher
        self.starts = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> StartingRunners:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.launcher.prestart()
            self.launcher.settle()
            self.starts += self.launcher.SPARES
            self.launcher.close()

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data-dir", type=Path, default=Path("var/bench"))
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--only", nargs="*", default=None, help="sizes: small medium large")
    args = ap.parse_args()
    settings = Settings(device=args.device, data_dir=args.data_dir.resolve(), compile_backend="process")
    pipe = make_local_pipeline(settings, with_pch=False)
    judge_launcher = pipe.evaluator.judge.launcher
    starter = RunnerLauncher(args.device, judge_launcher.isolate, scratch_root=judge_launcher.scratch_root)
    kind = "cuda" if args.device.startswith("cuda") else "cpu"
    solution = read_solution(EXAMPLES / f"l1/relu/{kind}_ok.py")
    opts = EvalOptions(compile_baseline=False)
    rows: list[dict[str, Any]] = []
    for size, n_rows in SIZES.items():
        if args.only and size not in args.only:
            continue
        spec = relu_task(n_rows)
        pipe.evaluate(spec, solution, opts)  # compile, baselines and warm-up, not counted
        quiet: list[float] = []
        beside: list[float] = []
        starts = 0
        for i in range(2 * args.repeats):
            disturbed = i % 4 in (1, 2)  # ABBA
            if disturbed:
                with StartingRunners(starter) as runners:
                    time.sleep(0.2)  # the first start is under way before the evaluation begins
                    r = pipe.evaluate(spec, solution, opts)
                starts += runners.starts
            else:
                r = pipe.evaluate(spec, solution, opts)
            if r.timings.candidate is None:
                raise SystemExit(f"{size}: {r.status.value}: {(r.message or '')[:500]}")
            (beside if disturbed else quiet).append(r.timings.candidate.median_ms)
        q, b = statistics.median(quiet), statistics.median(beside)
        row = {
            "size": f"{size} ({n_rows}x4096)",
            "quiet_medians_ms": quiet,
            "beside_medians_ms": beside,
            "quiet_median_ms": q,
            "beside_median_ms": b,
            "beside_vs_quiet": b / q - 1,
            "quiet_spread": (max(quiet) - min(quiet)) / statistics.fmean(quiet),
            "runner_starts_beside": starts,
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    pipe.evaluator.judge.launcher.close()
    lines = [
        f"# Runner starts beside timing ({args.device}, {args.repeats} evaluations each way, ABBA)",
        "",
        "| ReLU size | quiet median of medians ms | beside starts ms | beside vs quiet | quiet spread "
        "| runner starts beside |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['size']} | {r['quiet_median_ms']:.5f} | {r['beside_median_ms']:.5f} | "
        f"{r['beside_vs_quiet'] * 100:+.2f}% | {r['quiet_spread'] * 100:.2f}% | {r['runner_starts_beside']} |"
        for r in rows
    ]
    write_report(args.out, "start_beside_timing", rows, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
