"""Vet the builtin fused-operator pool (evalsvc/pools/builtin.py, 33 tasks) on one device, in process,
print the suite report and write it as markdown and JSON; then evaluate one vetted task with a bundled
CUDA solution (evalsvc/examples/l2/gemm_bias_relu/cuda_ok.py against the builtin gemm_bias_relu at
4096x4096x4096) and show from its timings that its baselines came from the cache the vetting filled.

    python -m bench.gpu_vet --device cuda --out OUTDIR --data-dir DIR
    python -m bench.gpu_vet --device cuda --out OUTDIR --pool KernelBench/ --per-level 1:20 2:15 \
        --name vet_kernelbench

With `--bundled`, the bundled example tasks at the size this device's solutions are judged at
(`evalsvc/examples`, `task_cuda.py` on cuda) are vetted instead (report `vet_bundled`): they must pass.
With `--pool`, a sample of an imported pool (any format `evalsvc tasks import` reads; `--per-level` draws
that many tasks of each KernelBench level with `--seed`, `--sample N` draws N of the pool's tasks, e.g. of
an Ops-6K Parquet file, with `--seed`) is vetted instead, and the report is `NAME.json`.

    python -m bench.gpu_vet --device cuda --out OUTDIR --pool ops6k.parquet --sample 40 --seed 22 \
        --name vet_ops6k

No Redis needed: the vetter and the judge share one in-process baseline cache (the workers share the
Redis one, `evalsvc.store.baselines.RedisBaselineCache`, under the same keys). torch.compile is checked
until `--compile-budget` seconds of vetting have passed; later tasks are vetted eager-only (said in the
output).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from evalsvc.cli_files import read_solution, read_task
from evalsvc.core.options import EvalOptions
from evalsvc.core.pools import Suite, VetPolicy, VetRecord, suite_report
from evalsvc.core.tasks import TaskSpec
from evalsvc.pools.builtin import read_builtin
from evalsvc.pools.report import report_markdown
from evalsvc.settings import Settings

EXAMPLE = (
    Path(__file__).resolve().parents[1] / "evalsvc" / "examples" / "l2" / "gemm_bias_relu" / "cuda_ok.py"
)
TARGET = "builtin/gemm_bias_relu/M4096_K4096_N4096"


def _vet_all(
    vetter: Any, specs: list[tuple[str, TaskSpec]], args: argparse.Namespace
) -> list[tuple[str, VetRecord]]:
    from evalsvc.core.pools import vet_error

    rows = []
    started = time.monotonic()
    for name, spec in specs:
        if time.monotonic() - started > args.vet_budget:
            print(f"{name:58s} not vetted: past the {args.vet_budget:g} s vetting budget", flush=True)
            continue
        compile_on = time.monotonic() - started < args.compile_budget or name == TARGET
        policy = VetPolicy(
            min_eager_ms=args.min_ms,
            max_eager_ms=args.max_ms,
            check_compile=compile_on,
            timing_budget_s=args.budget,
        )
        try:
            rec = vetter.vet(spec, policy)
        except Exception as e:  # one task must not stop the others
            traceback.print_exc()
            rec = vet_error(spec.id, vetter.device_class, f"{type(e).__name__}: {e}")
        rows.append((name, rec))
        reasons = "; ".join(f"{f.reason.value}: {f.message[:90]}" for f in rec.findings)
        eager = f"{rec.eager_ms:.3f}" if rec.eager_ms is not None else "—"
        comp = f"{rec.compiled_ms:.3f}" if rec.compiled_ms is not None else ("—" if compile_on else "skipped")
        print(
            f"{name:58s} {rec.status.value:8s} eager {eager:>9s} ms  compiled {comp:>9s} ms  "
            f"{rec.duration_s:5.1f}s  {reasons}",
            flush=True,
        )
    return rows


def _evaluate(pipe: Any, compiled: Future, spec: TaskSpec, budget: float) -> dict[str, Any]:
    outcome = compiled.result()
    if outcome.artifact_key is None:
        return {"error": f"the solution did not compile: {outcome.status} {outcome.message}"}
    options = EvalOptions(timing_budget_s=budget)
    solution = read_solution(EXAMPLE)
    out: dict[str, Any] = {}
    for label, opts in (
        ("after vetting (same timing policy: cache hit)", options),
        (
            "other timing budget (cache miss, for contrast)",
            options.model_copy(update={"timing_budget_s": budget * 1.5}),
        ),
    ):
        r = pipe.evaluator.evaluate(spec, solution, outcome.artifact_key, outcome.report, opts)
        t = r.timings
        out[label] = {
            "status": r.status.value,
            "reward": r.reward,
            "message": r.message,
            "duration_s": r.duration_s,
            "eager_cached": t.eager_cached,
            "compiled_cached": t.compiled_cached,
            "baseline_cached": t.baseline_cached,
            "baselines_measured_s": t.baselines_measured_s,
            "candidate_ms": t.candidate.median_ms if t.candidate else None,
            "eager_ms": t.eager.median_ms if t.eager else None,
            "compiled_ms": t.compiled.median_ms if t.compiled else None,
            "task_hash": r.provenance.task_hash if r.provenance else None,
            "device_name": r.provenance.device_name if r.provenance else None,
        }
        print(f"evaluation {label}: {json.dumps(out[label])}", flush=True)
    return out


def _write(out: Path, name: str, md: str, doc: dict[str, Any]) -> None:
    (out / f"{name}.md").write_text(md)
    (out / f"{name}.json").write_text(json.dumps(doc, indent=1))


def _bundled(device: str) -> list[tuple[str, TaskSpec]]:
    """Each bundled example task once, at the size this device kind's solutions are judged at."""
    from evalsvc.suite import cases

    paths = {c.task_id: c.task_path for c in cases(device.split(":")[0])}
    return [(task_id, read_task(path)) for task_id, path in paths.items()]


def _pool_sample(path: Path, per_level: list[str], seed: int, sample: int = 0) -> list[tuple[str, TaskSpec]]:
    """Tasks of an imported pool; with `per_level` ("LEVEL:N"), N drawn at random from each level; with
    `sample` > 0, that many drawn at random from those (in pool order); both seeded by `seed`."""
    import random

    from evalsvc.pools.importers import READERS, detect_format

    items = [c for c in READERS[detect_format(path)](path).items if c.error is None]
    rng = random.Random(seed)
    if per_level:
        picked = []
        for spec in per_level:
            level, _, n = spec.partition(":")
            of_level = [c for c in items if c.tags.get("level") == level]
            picked += rng.sample(of_level, min(int(n), len(of_level)))
        items = picked
    if sample > 0:
        chosen = set(rng.sample(range(len(items)), min(sample, len(items))))
        items = [c for i, c in enumerate(items) if i in chosen]
    return [(c.name, TaskSpec(source=c.source, meta=c.meta, name=c.name)) for c in items]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data-dir", type=Path, default=Path("var/bench"))
    ap.add_argument("--budget", type=float, default=0.5, help="timing budget per baseline (s)")
    ap.add_argument("--compile-budget", type=float, default=80.0, help="seconds of torch.compile checks")
    ap.add_argument("--vet-budget", type=float, default=150.0, help="seconds; later tasks are not vetted")
    ap.add_argument("--min-ms", type=float, default=VetPolicy().min_eager_ms)
    ap.add_argument("--max-ms", type=float, default=VetPolicy().max_eager_ms)
    ap.add_argument("--match", default="", help="only tasks whose name contains this (smoke runs)")
    ap.add_argument("--no-eval", action="store_true", help="skip the evaluation of the CUDA solution")
    ap.add_argument("--pool", type=Path, default=None, help="vet this pool, not the builtin")
    ap.add_argument("--bundled", action="store_true", help="vet the bundled example tasks, not the builtin")
    ap.add_argument("--per-level", nargs="*", default=[], help="LEVEL:N tasks drawn from each level")
    ap.add_argument("--sample", type=int, default=0, help="N tasks drawn from the pool (e.g. Ops-6K)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="vet_report", help="report file name (without .json/.md)")
    args = ap.parse_args()
    if args.pool is not None or args.bundled:
        args.no_eval = True
    t0 = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    from evalsvc.engine.device_info import device_name
    from evalsvc.pools.vet import Vetter
    from evalsvc.wiring import make_local_pipeline

    settings = Settings(device=args.device, data_dir=args.data_dir.resolve(), compile_backend="process")
    pipe, compiled = None, None
    pool = ThreadPoolExecutor(1)
    try:
        if not args.no_eval:
            pipe = make_local_pipeline(settings, with_pch=False)
            compiled = pool.submit(pipe.compiler.compile, read_solution(EXAMPLE))  # builds while we vet
    except Exception:
        traceback.print_exc()
    baselines = pipe.evaluator.judge.baselines if pipe is not None else None
    if baselines is None:
        from evalsvc.engine.baselines import MemoryBaselineCache

        baselines = MemoryBaselineCache()
    name = device_name(torch.device(args.device))
    device_class = name.replace("NVIDIA ", "").split()[0] if args.device.startswith("cuda") else "cpu"
    vetter = Vetter(args.device, device_class, baselines)
    if args.pool is not None:
        specs = _pool_sample(args.pool, args.per_level, args.seed, args.sample)
    elif args.bundled:
        specs = _bundled(args.device)
    else:
        specs = [(c.name, TaskSpec(source=c.source, meta=c.meta, name=c.name)) for c in read_builtin().items]
    specs = [(n, s) for n, s in specs if args.match in n]
    print(
        f"{len(specs)} tasks on {name} ({device_class}); window {args.min_ms:g}-{args.max_ms:g} ms, "
        f"torch.compile checked for the first {args.compile_budget:g} s",
        flush=True,
    )
    rows = _vet_all(vetter, specs, args)
    records = {r.task_id: r for _, r in rows}
    suite_name = args.pool.name if args.pool else "bundled" if args.bundled else "builtin-fused"
    suite = Suite(name=suite_name, version=1, task_ids=[s.id for _, s in specs])
    report = suite_report(suite, device_class, records)
    md = report_markdown(report, rows)
    skipped = [n for n, r in rows if not r.compile_checked and r.status.value != "rejected"]
    if skipped:
        md += (
            f"\ntorch.compile not checked (past the {args.compile_budget:g} s budget): {len(skipped)} tasks\n"
        )
    print(md, flush=True)
    doc: dict[str, Any] = {
        "device": name,
        "torch": torch.__version__,
        "report": report.model_dump(mode="json"),
        "records": {n: r.model_dump(mode="json") for n, r in rows},
        "vet_s": time.monotonic() - t0,
    }
    _write(args.out, args.name, md, doc)  # now, in case the evaluation below does not return
    target = dict(specs).get(TARGET)
    if pipe is not None and compiled is not None and target is not None:
        try:
            doc["evaluation"] = _evaluate(pipe, compiled, target, args.budget)
        except Exception:
            traceback.print_exc()
    pool.shutdown(wait=False)
    doc["total_s"] = time.monotonic() - t0
    _write(args.out, args.name, md, doc)
    print(f"total {doc['total_s']:.0f} s; wrote {args.out / args.name}.md and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
