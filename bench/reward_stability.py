"""Does the reward of an honest solution hold still across fresh processes? Each honest solution of the
bundled suite (`evalsvc/examples/suite.json`, `expect: ok`, this device kind) is compiled once here, then
evaluated once in each of K fresh processes run one after another: every process starts with an empty
baseline cache (it is in memory), so each repeat measures its own eager and torch.compile baselines, while
the build comes from the shared data dir (a cache hit). A milestone that changes between processes is a
reward the trainer cannot trust; one whose evaluations said so (`uncertain`) is at least marked.

    python3 -m bench.reward_stability --device cpu|cuda --repeats K [--only TASK ...] --out DIR
        [--data-dir DIR] [--budget S]

On cpu the CPU-sized copy of a task (tests/corpus/tasks/<task_id>/task.py) is used where there is one, on
cuda the example task itself. Options: `EvalOptions(timing_budget_s=--budget)` (default 0.5 s) with the
torch.compile baseline on for both devices. Measured on a 2-core CPU box (l1/relu, CPU-sized): it adds about
2.3 s to a process's evaluation with the inductor cache warm, 13 s once where the cache is cold (the cache
is on disk, so only the first process pays), against about 14 s per process in all; cheap enough to keep
the milestone-3 threshold among what is measured.

Per solution the JSON row holds one entry per repeat in `milestones`, `uncertain`, `rewards`, `statuses`,
`speedup_eager`, `speedup_compile`, `eager_ci95`, `compile_ci95` (the speedups' intervals), `eager_ms`,
`compile_ms`, `candidate_ms` (the medians the evaluation used), `compile_cached` and `decisions` (None where
that repeat's process gave no result; why is in `errors`), and these summaries:

- `milestone_flips`: the repeats that have a milestone do not all have the same one.
- `unmarked_flip`: a flip that the evaluations did not mark. A flip is marked when every distinct milestone
  value except at most one has all of its repeats marked `uncertain`: at most one side of the flip may
  claim confidence, every other side must have said its threshold decision straddled the threshold.
  Repeats with no milestone (missing) take no part.
- `eager_spread`, `compile_spread`, `candidate_spread`: (max - min) / median of that median over the
  repeats that have it; None with fewer than two.

`uncertain` and `decisions` are read with getattr: before the result carries them they are False and [].
Where this runs without root the runner's isolation is "none" (as tests/conftest.py does): the subjects
are the repo's own honest solutions.

Writes `reward_stability.json` and `reward_stability.md` under --out (plus each process's log,
`worker-<i>.log`); exits 0 once the JSON is written, whatever the processes did.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.report import write_report
from evalsvc.cli_files import read_solution, read_task
from evalsvc.core.options import EvalOptions
from evalsvc.core.results import EvaluationResult
from evalsvc.settings import Settings
from evalsvc.suite import cases

ROOT = Path(__file__).resolve().parents[1]
SMALL_TASKS = ROOT / "tests" / "corpus" / "tasks"
NAME = "reward_stability"
PER_REPEAT = (
    "statuses",
    "rewards",
    "milestones",
    "uncertain",
    "speedup_eager",
    "speedup_compile",
    "eager_ci95",
    "compile_ci95",
    "eager_ms",
    "compile_ms",
    "candidate_ms",
    "compile_cached",
    "decisions",
)
# A fresh process imports torch, builds its pipeline and measures every baseline again: be generous.
PROCESS_BASE_S = 600.0
PROCESS_PER_SUBJECT_S = 120.0


@dataclass(frozen=True)
class Subject:
    name: str  # the solution's path under evalsvc/examples, e.g. l1/relu/cpu_ok.py
    task_id: str
    task_path: Path
    solution_path: Path


def device_kind(device: str) -> str:
    return "cuda" if device.startswith("cuda") else "cpu"


def subjects(device: str, only: list[str] | None) -> list[Subject]:
    """The suite's honest solutions for this device kind, on the CPU-sized task copy on cpu."""
    kind = device_kind(device)
    out = []
    for c in cases(kind):
        if c.expect != "ok" or (only and c.task_id not in only):
            continue
        small = SMALL_TASKS / c.task_id / "task.py"
        task_path = small if kind == "cpu" and small.is_file() else c.task_path
        out.append(Subject(c.name, c.task_id, task_path, c.solution_path))
    return out


def settings_for(args: argparse.Namespace) -> Settings:
    # Runner isolation drops privileges, which needs root; without it, the same fallback as the tests.
    isolation = "process" if os.geteuid() == 0 else "none"
    return Settings(
        device=args.device,
        data_dir=args.data_dir,
        compile_backend="process",
        runner_isolation=isolation,
    )


def options_for(args: argparse.Namespace) -> EvalOptions:
    return EvalOptions(timing_budget_s=args.budget, compile_baseline=True)


# -- one fresh process: every subject evaluated once ------------------------------------------------------


def result_entry(r: EvaluationResult) -> dict[str, Any]:
    """What one evaluation contributes to its row (fields the result may not have yet read with getattr)."""
    t = r.timings
    decisions = [
        d.model_dump(mode="json") if hasattr(d, "model_dump") else d for d in getattr(r, "decisions", [])
    ]
    return {
        "status": r.status.value,
        "reward": r.reward,
        "milestone": r.milestone,
        "uncertain": bool(getattr(r, "uncertain", False)),
        "speedup_eager": r.speedup.eager,
        "speedup_compile": r.speedup.compile,
        "eager_ci95": getattr(r.speedup, "eager_ci95", None),
        "compile_ci95": getattr(r.speedup, "compile_ci95", None),
        "eager_ms": t.eager.median_ms if t.eager else None,
        "compile_ms": t.compiled.median_ms if t.compiled else None,
        "candidate_ms": t.candidate.median_ms if t.candidate else None,
        "compile_cached": r.compile.cached if r.compile else None,
        "decisions": decisions,
        "message": (r.message or "")[:500],
    }


def run_worker(args: argparse.Namespace) -> int:
    from evalsvc.wiring import make_local_pipeline

    pipe = make_local_pipeline(settings_for(args), with_pch=False)
    opts = options_for(args)
    done: dict[str, dict[str, Any]] = {}
    for s in subjects(args.device, args.only):
        try:
            r = pipe.evaluate(read_task(s.task_path), read_solution(s.solution_path), opts)
            done[s.name] = result_entry(r)
        except Exception as e:  # one subject's failure of ours must not cost the others their results
            done[s.name] = {"error": f"{type(e).__name__}: {e}"[:500]}
        # Written after every subject: a process that dies later still leaves what it had.
        tmp = args.worker.with_suffix(".tmp")
        tmp.write_text(json.dumps(done))
        tmp.replace(args.worker)
        print(json.dumps({"solution": s.name, **done[s.name]}), flush=True)
    return 0


# -- the parent: compile once, K processes one after another, the table ----------------------------------


def compile_all(args: argparse.Namespace, subs: list[Subject]) -> None:
    """Builds every subject into the shared data dir so that each process finds it cached."""
    from evalsvc.wiring import make_local_pipeline

    pipe = make_local_pipeline(settings_for(args), with_pch=False)
    for s in subs:
        t0 = time.monotonic()
        task = read_task(s.task_path)
        outcome = pipe.compiler.compile(read_solution(s.solution_path), task.meta.allow_vendor_libs)
        print(f"compiled {s.name}: {outcome.status.value} in {time.monotonic() - t0:.1f} s", flush=True)


def worker_argv(args: argparse.Namespace, rows_file: Path) -> list[str]:
    argv = [sys.executable, "-m", "bench.reward_stability", "--worker", str(rows_file)]
    argv += ["--device", args.device, "--repeats", str(args.repeats), "--out", str(args.out)]
    argv += ["--data-dir", str(args.data_dir), "--budget", str(args.budget)]
    if args.only:
        argv += ["--only", *args.only]
    return argv


def run_process(argv: list[str], log: Path, timeout_s: float) -> str | None:
    """Runs one worker to its end; None when it exited 0, else what went wrong."""
    with log.open("w") as out:
        # A session of its own: on timeout the whole group goes, the runner processes it started too.
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return f"timed out after {timeout_s:.0f} s"
    if rc != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        return f"exit {rc}: {' | '.join(tail)[-400:]}"
    return None


def spread(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    if len(present) < 2:
        return None
    mid = statistics.median(present)
    return (max(present) - min(present)) / mid if mid > 0 else None


def unmarked_flip(milestones: list[int | None], uncertain: list[bool | None]) -> bool:
    """A flip, and more than one milestone value has a repeat that did not mark itself uncertain."""
    pairs = [(m, bool(u)) for m, u in zip(milestones, uncertain, strict=True) if m is not None]
    values = {m for m, _ in pairs}
    if len(values) < 2:
        return False
    confident = {m for m, u in pairs if not u}
    return len(confident) > 1


def build_row(s: Subject, per_repeat: list[dict[str, Any] | None], errors: list[str]) -> dict[str, Any]:
    singular = {k: k for k in PER_REPEAT}
    singular.update({"statuses": "status", "rewards": "reward", "milestones": "milestone"})
    row: dict[str, Any] = {
        "solution": s.name,
        "task": s.task_id,
        "task_file": str(s.task_path.relative_to(ROOT)),
    }
    for key in PER_REPEAT:
        row[key] = [e.get(singular[key]) if e else None for e in per_repeat]
    row["messages"] = [e.get("message") if e else None for e in per_repeat]
    present = [m for m in row["milestones"] if m is not None]
    row["milestone_flips"] = len(set(present)) > 1
    row["unmarked_flip"] = unmarked_flip(row["milestones"], row["uncertain"])
    for key in ("eager", "compile", "candidate"):
        row[f"{key}_spread"] = spread(row[f"{key}_ms"])
    row["errors"] = errors
    return row


def fmt(x: float | None, spec: str = ".3f") -> str:
    return "—" if x is None else format(x, spec)


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def joined(values: list[Any]) -> str:
    return ", ".join("—" if v is None else str(v) for v in values)


def table(doc: dict[str, Any], header: str) -> list[str]:
    lines = [
        header,
        "",
        "| solution | milestones | uncertain | rewards | eager ms min-max | eager spread | compile spread "
        "| candidate spread |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["rows"]:
        eager = [v for v in r["eager_ms"] if v is not None]
        span = f"{min(eager):.3f}-{max(eager):.3f}" if eager else "—"
        marks = joined(["U" if u else "-" if u is not None else None for u in r["uncertain"]])
        lines.append(
            f"| {r['solution']} | {joined(r['milestones'])} | {marks} | {joined(r['rewards'])} | {span} "
            f"| {pct(r['eager_spread'])} | {pct(r['compile_spread'])} | {pct(r['candidate_spread'])} |"
        )
    lines.append("")
    for r in doc["rows"]:
        odd = [s for s in r["statuses"] if s != "ok"]
        if odd or r["errors"]:
            lines.append(f"- {r['solution']}: statuses {joined(r['statuses'])}; errors: {r['errors']}")
    flips = sum(r["milestone_flips"] for r in doc["rows"])
    unmarked = sum(r["unmarked_flip"] for r in doc["rows"])
    lines.append(
        f"Unmarked milestone flips: {unmarked} of {len(doc['rows'])} solutions ({flips} flipped in all)."
    )
    return lines


def commit_of_tree() -> str | None:
    """git's short HEAD, or the COMMIT file that travels with a device copy of the tree (it has no .git)."""
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    if git.returncode == 0 and git.stdout.strip():
        return git.stdout.strip()
    carried = ROOT / "COMMIT"
    return (carried.read_text().strip()[:12] or None) if carried.is_file() else None


def run_parent(args: argparse.Namespace) -> int:
    subs = subjects(args.device, args.only)
    if not subs:
        print(f"no honest {device_kind(args.device)} solutions for --only {args.only}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    args.data_dir.mkdir(parents=True, exist_ok=True)
    compile_all(args, subs)
    timeout_s = PROCESS_BASE_S + PROCESS_PER_SUBJECT_S * len(subs)
    per_subject: dict[str, list[dict[str, Any] | None]] = {s.name: [] for s in subs}
    errors: dict[str, list[str]] = {s.name: [] for s in subs}
    wall: list[float] = []
    commit = commit_of_tree()
    for i in range(args.repeats):
        rows_file = args.out / f"worker-{i}.json"
        rows_file.unlink(missing_ok=True)
        t0 = time.monotonic()
        failed = run_process(worker_argv(args, rows_file), args.out / f"worker-{i}.log", timeout_s)
        wall.append(round(time.monotonic() - t0, 1))
        print(f"process {i + 1}/{args.repeats}: {wall[-1]} s{'; ' + failed if failed else ''}", flush=True)
        got: dict[str, dict[str, Any]] = {}
        with contextlib.suppress(OSError, ValueError):
            got = json.loads(rows_file.read_text())
        for s in subs:
            entry = got.get(s.name)
            if entry is None or "error" in entry:
                per_subject[s.name].append(None)
                why = (entry or {}).get("error") or failed or "no result"
                errors[s.name].append(f"repeat {i}: {why}")
            else:
                per_subject[s.name].append(entry)
        # After every process, so that a run cut short by an outer time limit keeps what it measured.
        doc = {
            "device": args.device,
            "repeats": args.repeats,
            "repeats_done": i + 1,
            "budget_s": args.budget,
            "compile_baseline": True,
            "commit": commit,
            "process_wall_s": wall,
            "rows": [build_row(s, per_subject[s.name], errors[s.name]) for s in subs],
        }
        header = (
            f"Reward stability, {args.device}, {i + 1} of {args.repeats} fresh processes, "
            f"budget {args.budget} s, commit {commit}, {time.strftime('%Y-%m-%d %H:%M')}; "
            f"processes took {wall} s"
        )
        write_report(args.out, NAME, doc, table(doc, header))
    return 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    ap.add_argument("--repeats", type=int, default=3, help="fresh processes, one after another")
    ap.add_argument("--only", nargs="+", action="extend", metavar="TASK", help="task ids, e.g. l1/relu")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data-dir", type=Path, default=Path("var/bench-stability"))
    ap.add_argument("--budget", type=float, default=0.5, help="timing budget per timed subject, seconds")
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)  # internal: one fresh process's rows file
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    # Absolute, so that the worker processes (run from the repo root) find the same places.
    args.out = args.out.resolve()
    args.data_dir = args.data_dir.resolve()
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    return run_worker(args) if args.worker else run_parent(args)


if __name__ == "__main__":
    raise SystemExit(main())
