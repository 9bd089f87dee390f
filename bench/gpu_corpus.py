"""The exploit and honest corpora on one device at full task size: every exploit must get its expected
verdict, every honest solution must pass. Prints a markdown table, writes JSON.

    python -m bench.gpu_corpus --device cuda --out OUTDIR
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
from tests.corpus.reader import SCREENS, entries, header, task_for


def compile_for(pipe: LocalPipeline, path: Path, device: str) -> None:
    """With the task: a Triton artifact's kernels are compiled ahead for the inputs it is judged on."""
    pipe.compiler.compile(read_solution(path), task=task_for(path, device))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data-dir", type=Path, default=Path("var/bench"))
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--only", nargs="*", default=None, help="entries whose file name contains one of these")
    ap.add_argument("--name", default="corpus", help="report name")
    args = ap.parse_args()
    # Every round's time on the judge's clock, null and candidate, in the log (what the timing bound used).
    logging.basicConfig(format="%(name)s: %(message)s")
    logging.getLogger("evalsvc.judged_timing").setLevel(logging.DEBUG)
    devices = ("any", "cuda") if args.device.startswith("cuda") else ("any", "cpu")
    settings = Settings(device=args.device, data_dir=args.data_dir.resolve(), compile_backend="process")
    pipe = make_local_pipeline(settings, with_pch=False)
    subjects = [(p, header(p).get("expect", "ok")) for p in entries("exploits", devices)]
    subjects += [(p, "ok") for p in entries("honest", devices)]
    subjects = [s for s in subjects if not args.only or any(word in s[0].name for word in args.only)]
    t0 = time.monotonic()
    for screens in SCREENS:  # compiles in parallel, one screen setting at a time; evaluations one at a time
        pipe.compiler.screens = SCREENS[screens]
        group = [s for s in subjects if header(s[0]).get("screens", "on") == screens]
        with ThreadPoolExecutor(args.jobs) as pool:
            list(pool.map(lambda s: compile_for(pipe, s[0], args.device), group))
    print(f"compiled {len(subjects)} submissions in {time.monotonic() - t0:.0f} s", flush=True)
    opts = EvalOptions(trials=5, timing_budget_s=0.5, compile_baseline=False)
    rows = []
    for path, expect in subjects:
        pipe.compiler.screens = SCREENS[header(path).get("screens", "on")]
        r = pipe.evaluate(task_for(path, args.device), read_solution(path), opts)
        rows.append(
            {
                "submission": f"{path.parent.name}/{path.name}",
                "trick": header(path).get("trick") or header(path).get("style", ""),
                "expected": expect,
                "got": r.status.value,
                "rules": sorted({f.rule for f in r.findings}),
                "caught_by": header(path).get("caught by", ""),
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
