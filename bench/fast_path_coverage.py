"""How many CUDA solutions the compile fast path takes: one cold compile each through the real compile stage.

    CUDA_HOME=/usr/local/cuda python -m bench.fast_path_coverage --out docs/results/x \
        --data-dir /tmp/styles-data --jobs 2 --full-check 10

Solutions, in three groups: `bench/compile_styles/*.py` (styles), the bundled CUDA examples
(`evalsvc/examples/*/*/cuda_*.py`) and the honest corpus (`tests/corpus/honest/*cuda*`, a directory being a
CUDA Agent tree). Each gets one cold build (an empty `LocalArtifactStore`, `with_pch=True`, backend
`process`) with the fast path on; the row says whether every extension was built against the torch
stand-in and, where not, the reason (the build then fell back to the full build). `--full-check N` also
builds the first N fast-path-ok solutions with the fast path off, to catch a stand-in that accepts what the
real headers reject (or the reverse: a fast-path compile error that the full build passes).

Builds run in `--jobs` worker processes; CPU-seconds are the user + sys of one worker's children during its
build (`resource.getrusage(RUSAGE_CHILDREN)`), so they stay per build when builds run side by side (wall
seconds do not: they include waiting for the CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from bench.compile_speed import children_cpu_s
from evalsvc.cli_files import read_solution
from evalsvc.core.solutions import Solution
from evalsvc.settings import Settings
from evalsvc.store.artifacts import LocalArtifactStore
from evalsvc.wiring import make_compiler

ROOT = Path(__file__).resolve().parent.parent
GROUPS = {
    "styles": lambda: sorted((ROOT / "bench" / "compile_styles").glob("*.py")),
    "bundled": lambda: sorted((ROOT / "evalsvc" / "examples").glob("*/*/cuda_*.py")),
    "honest": lambda: sorted((ROOT / "tests" / "corpus" / "honest").glob("*cuda*")),
}


def _settings(data_dir: Path, timeout: float) -> Settings:
    # Its own owner name, as bench/compile_speed.py does, so no other run's sandboxes are touched.
    return Settings(
        data_dir=data_dir,
        compile_backend="process",
        worker_name="bench-fast-path-coverage",
        compile_timeout_s=timeout,
    )


def cold_build(settings: Settings, solution: Solution, fast_path: bool) -> dict[str, object]:
    """bench/compile_speed.py's cold build, plus the first lines of the error where it does not build."""
    with tempfile.TemporaryDirectory(prefix="bench-store-") as store_dir:
        compiler = make_compiler(settings, LocalArtifactStore(Path(store_dir)), with_pch=True)
        compiler.fast_path = fast_path
        cpu, t = children_cpu_s(), time.monotonic()
        outcome = compiler.compile(solution)
        wall, cpu = time.monotonic() - t, children_cpu_s() - cpu
    report = outcome.report
    # A refusal by the static checks has no build: its message says which rule.
    error = outcome.message or "; ".join(str(d) for d in report.diagnostics[:2]) or report.log_excerpt[-300:]
    return {
        "status": outcome.status.value,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "fast_path": report.fast_path,
        "fast_path_reason": report.fast_path_reason,
        "error": "" if outcome.status.value == "ok" else error[:400],
    }


def _build(job: tuple[str, str, str, bool, str, float]) -> dict[str, object]:
    """One cold build in a pool worker (its own children, so its own CPU-seconds)."""
    group, name, path, fast_path, data_dir, timeout = job
    settings = _settings(Path(data_dir), timeout)
    try:
        row = cold_build(settings, read_solution(Path(path)), fast_path=fast_path)
    except Exception as exc:  # a crash of the stage is a finding, not the end of the run
        row = {
            "status": "crashed",
            "fast_path": False,
            "fast_path_reason": repr(exc)[:400],
            "cpu_s": None,
            "wall_s": None,
            "error": repr(exc)[:400],
        }
    return {"group": group, "solution": name, **row}


def _table(rows: list[dict[str, object]], full: dict[str, dict[str, object]]) -> list[str]:
    lines = [
        "| group | solution | status | fast_path | cpu_s | wall_s | full build (fast path off) "
        "| fast_path_reason | error (where not ok) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        f = full.get(str(r["solution"]))
        full_cell = f"{f['status']} ({f['cpu_s']} CPU-s)" if f else ""
        reason, error = (
            str(r[k] or "").replace("|", "\\|").replace("\n", " ")[:300]
            for k in ("fast_path_reason", "error")
        )
        lines.append(
            f"| {r['group']} | {r['solution']} | {r['status']} | {r['fast_path']} | {r['cpu_s']} "
            f"| {r['wall_s']} | {full_cell} | {reason} | {error} |"
        )
    return lines


def write_report(
    rows: list[dict[str, object]], full: dict[str, dict[str, object]], out: Path, how: str
) -> None:
    """The share on the fast path per group, the full-build mismatches and the table, as .md and .json."""
    share = {}
    for group in GROUPS:
        members = [r for r in rows if r["group"] == group]
        on = sum(bool(r["fast_path"]) for r in members)
        # Refused before any build (static checks, flag policy): fast_path is None, no build to take.
        built = sum(r["fast_path"] is not None for r in members)
        share[group] = {
            "solutions": len(members),
            "built": built,
            "fast_path": on,
            "share": round(on / len(members), 3) if members else None,
            "share_of_built": round(on / built, 3) if built else None,
        }
    mismatches = [
        {
            "solution": name,
            "fast_path_status": next(r["status"] for r in rows if r["solution"] == name),
            "full_status": f["status"],
        }
        for name, f in full.items()
        if f["status"] != next(r["status"] for r in rows if r["solution"] == name)
    ]
    summary = {"share": share, "full_checked": len(full), "status_mismatches": mismatches}
    lines = [
        f"# Fast path coverage ({os.uname().nodename}, {os.cpu_count()} CPUs, backend process, {how})",
        "",
        "| group | solutions | reached a build | on the fast path | share | share of those built |",
        "|---|---|---|---|---|---|",
        *[
            f"| {g} | {s['solutions']} | {s['built']} | {s['fast_path']} | {s['share']} "
            f"| {s['share_of_built']} |"
            for g, s in share.items()
        ],
        "",
        f"Fast-path status vs full build, {len(full)} checked: "
        + (json.dumps(mismatches) if mismatches else "no mismatch"),
        "",
        *_table(rows, full),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    (out / "fast_path_coverage.md").write_text(text)
    (out / "fast_path_coverage.json").write_text(
        json.dumps({"rows": rows, "full_check": list(full.values()), "summary": summary}, indent=1)
    )


def from_log(log: Path, out: Path, how: str) -> None:
    """The report again from the JSON lines a run printed (for a run stopped before its end)."""
    rows, full = [], {}
    for line in log.read_text().splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            if row.pop("full_check", False):
                full[str(row["solution"])] = row
            else:
                rows.append(row)
    write_report(rows, full, out, how)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/styles-data"))
    ap.add_argument("--jobs", type=int, default=1, help="builds side by side (worker processes)")
    ap.add_argument("--full-check", type=int, default=0, help="full builds of the first N fast-path-ok")
    ap.add_argument("--only", nargs="*", help="solution names (relative to the repo) to build")
    ap.add_argument("--timeout", type=float, default=1800, help="compile timeout of the stage, s")
    ap.add_argument("--from-log", type=Path, help="only rewrite the report from this run's printed lines")
    ap.add_argument("--how", default="", help="with --from-log: how the run was made, for the title")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.from_log:
        from_log(args.from_log, args.out, args.how)
        return 0
    data_dir = args.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)

    t0 = time.monotonic()
    settings = _settings(data_dir, args.timeout)
    make_compiler(settings, LocalArtifactStore(settings.artifact_dir), with_pch=True)
    print(
        f"compiler ready (precompiled headers present or built) in {time.monotonic() - t0:.1f} s", flush=True
    )

    jobs = [
        (group, str(p.relative_to(ROOT)), str(p), True, str(data_dir), args.timeout)
        for group, listing in GROUPS.items()
        for p in listing()
        if not args.only or str(p.relative_to(ROOT)) in args.only
    ]
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = []
        for row in pool.map(_build, jobs):
            print(json.dumps(row), flush=True)
            rows.append(row)
        # The full-build check takes the fast-path-ok ones in listing order (styles first).
        checked = [r for r in rows if r["fast_path"]][: args.full_check]
        full_jobs = [
            (
                str(r["group"]),
                str(r["solution"]),
                str(ROOT / str(r["solution"])),
                False,
                str(data_dir),
                args.timeout,
            )
            for r in checked
        ]
        full = {}
        for row in pool.map(_build, full_jobs):
            print(json.dumps({"full_check": True, **row}), flush=True)
            full[str(row["solution"])] = row

    write_report(
        rows, full, args.out, f"sandbox cpus {settings.compile_cpus:g}, {args.jobs} builds side by side"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
