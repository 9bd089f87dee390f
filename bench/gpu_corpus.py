"""The exploit and honest corpora on one device at full task size: every exploit must get its expected
verdict, every honest solution must pass. Prints a markdown table, writes JSON.

    python -m bench.gpu_corpus --device cuda --out OUTDIR
    python -m bench.gpu_corpus --device cpu --with-pch --fast-path off --out OUTDIR   # issue 28

`--fast-path off` builds every load_inline solution as written (the CI suite judges the CPU corpus with the
fast path on, entries marked `build: full` excepted, as here).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.report import write_report
from evalsvc.cli_files import read_solution
from evalsvc.core.options import EvalOptions
from evalsvc.engine.evaluate import LocalPipeline
from evalsvc.settings import Settings
from evalsvc.wiring import make_local_pipeline
from tests.corpus.reader import SCREENS, entries, header, task_for, written_for_fast_path


def compile_for(pipe: LocalPipeline, path: Path, device: str) -> None:
    """With the task: a Triton artifact's kernels are compiled ahead for the inputs it is judged on."""
    pipe.compiler.compile(read_solution(path), task=task_for(path, device))


def build_setting(path: Path, fast_path: str) -> tuple[str, bool]:
    """The screens an entry is judged with, and whether its build may take the fast path (as
    tests/integration/test_exploits.py judges it)."""
    return header(path).get("screens", "on"), fast_path == "on" and written_for_fast_path(path)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data-dir", type=Path, default=Path("var/bench"))
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--only", nargs="*", default=None, help="entries whose file name contains one of these")
    ap.add_argument("--name", default="corpus", help="report name")
    ap.add_argument("--fast-path", choices=("on", "off"), default="on", help="off: every build as written")
    ap.add_argument(
        "--with-pch", action="store_true", help="prepare precompiled headers and the fast path first (as CI)"
    )
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--timing-budget-s", type=float, default=0.5)
    args = ap.parse_args()
    # Every round's time on the judge's clock, null and candidate, in the log (what the timing bound used).
    logging.basicConfig(format="%(name)s: %(message)s")
    logging.getLogger("evalsvc.judged_timing").setLevel(logging.DEBUG)
    devices = ("any", "cuda") if args.device.startswith("cuda") else ("any", "cpu")
    settings = Settings(device=args.device, data_dir=args.data_dir.resolve(), compile_backend="process")
    pipe = make_local_pipeline(settings, with_pch=args.with_pch)
    subjects = [(p, header(p).get("expect", "ok")) for p in entries("exploits", devices)]
    subjects += [(p, "ok") for p in entries("honest", devices)]
    subjects = [s for s in subjects if not args.only or any(word in s[0].name for word in args.only)]
    t0 = time.monotonic()
    # Compiles in parallel, one compiler setting at a time; evaluations one at a time.
    for setting in sorted({build_setting(p, args.fast_path) for p, _ in subjects}):
        pipe.compiler.screens, pipe.compiler.fast_path = SCREENS[setting[0]], setting[1]
        group = [s for s in subjects if build_setting(s[0], args.fast_path) == setting]
        with ThreadPoolExecutor(args.jobs) as pool:
            list(pool.map(lambda s: compile_for(pipe, s[0], args.device), group))
    print(f"compiled {len(subjects)} submissions in {time.monotonic() - t0:.0f} s", flush=True)
    opts = EvalOptions(trials=args.trials, timing_budget_s=args.timing_budget_s, compile_baseline=False)
    rows = []
    for path, expect in subjects:
        screens, pipe.compiler.fast_path = build_setting(path, args.fast_path)
        pipe.compiler.screens = SCREENS[screens]
        r = pipe.evaluate(task_for(path, args.device), read_solution(path), opts)
        rows.append(
            {
                "submission": f"{path.parent.name}/{path.name}",
                "trick": header(path).get("trick") or header(path).get("style", ""),
                "expected": expect,
                "got": r.status.value,
                "rules": sorted({f.rule for f in r.findings}),
                "caught_by": header(path).get("caught by", ""),
                "fast_path": r.compile.fast_path if r.compile else None,
                "reward": r.reward,
                "median_ms": r.timings.candidate.median_ms if r.timings.candidate else None,
                "judged_ms": r.timings.candidate_judged.per_call_ms if r.timings.candidate_judged else None,
                # The judge's clock in full (round and null-round figures): what the timing bound decided on.
                "judged": r.timings.candidate_judged.model_dump() if r.timings.candidate_judged else None,
                "message": (r.message or "")[: 300 if r.status.value == expect else 3000],
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    lines = ["| submission | expected | got | rules |", "|---|---|---|---|"]
    lines += [f"| {r['submission']} | {r['expected']} | {r['got']} | {', '.join(r['rules'])} |" for r in rows]
    wrong = [r["submission"] for r in rows if r["got"] != r["expected"]]
    lines.append(f"\n{len(rows) - len(wrong)}/{len(rows)} as expected; not as expected: {wrong}")
    write_report(args.out, args.name, rows, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
