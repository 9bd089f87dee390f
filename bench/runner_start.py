"""Where a runner's start goes, alone and with others starting at once (the evaluations in flight).

    python -m bench.runner_start --device cuda --out OUTDIR --rounds 3 --together 1 4 8

Children are started from a forkserver with the launcher's preload, as runners are, and go through a
runner's start step by step (the real `_isolate`, `set_device`, the context, the check kernels that
`runner._load_check_kernels` now runs at the first load, the `cpp_extension` import), each timed; the
parent times spawn-to-answer. Rounds of 1, 4 and 8 started together are compared in one run.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.report import write_report
from evalsvc.engine.launcher import PRELOAD
from evalsvc.sandbox.isolation import RUNNER_UIDS, runner_uid
from evalsvc.sandboxed.runner import RunnerSetup, _isolate

STEPS = ["isolate", "set_device", "context (first tensor)", "first kernels + sync", "import cpp_extension"]


def probe_main(conn: Any, setup: RunnerSetup, spawned_at: float) -> None:
    """runner_main's start, step by step (times are monotonic seconds)."""
    import torch

    marks = [time.monotonic()]
    _isolate(setup)
    marks.append(time.monotonic())
    device = torch.device(setup.device)
    if device.type == "cuda":
        device = torch.device("cuda", device.index or 0)
        torch.cuda.set_device(device)
    marks.append(time.monotonic())
    a = torch.zeros(1024, device=device)
    marks.append(time.monotonic())
    b = a.clone().fill_(1.0)
    torch.equal(a, b)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    marks.append(time.monotonic())
    importlib.import_module("torch.utils.cpp_extension")
    marks.append(time.monotonic())
    conn.send({"to_entry": marks[0] - spawned_at, "steps": [b - a for a, b in itertools.pairwise(marks)]})
    conn.close()
    os._exit(0)


def round_of(ctx: Any, device: str, n: int, root: Path, isolate: bool) -> list[dict[str, Any]]:
    """`n` children started at once; each one's step times and its spawn-to-answer time."""
    kids = []
    for slot in range(n):
        scratch = Path(tempfile.mkdtemp(prefix="start-", dir=root))
        uid = runner_uid(device, slot % RUNNER_UIDS)
        if isolate:
            os.chown(scratch, uid, uid)
        setup = RunnerSetup(str(scratch), device, isolate, memory_bytes=16 << 30, uid=uid)
        parent, child = ctx.Pipe(duplex=False)
        t = time.monotonic()
        proc = ctx.Process(target=probe_main, args=(child, setup, t), daemon=True)
        proc.start()
        child.close()
        kids.append((proc, parent, t, scratch))
    rows = []
    for proc, conn, t, scratch in kids:
        if conn.poll(120):
            got = conn.recv()
            rows.append({**got, "spawn_to_ready": time.monotonic() - t})
        proc.join(10)
        shutil.rmtree(scratch, ignore_errors=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--together", type=int, nargs="+", default=[1, 4, 8])
    args = ap.parse_args()
    isolate = os.geteuid() == 0
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    root = Path(tempfile.mkdtemp(prefix="runner-start-"))
    os.chmod(root, 0o711)
    round_of(ctx, args.device, 1, root, isolate)  # the forkserver's own start, not counted
    results = []
    for _ in range(args.rounds):  # interleaved, so a drift of the host hits every size alike
        for n in args.together:
            results.append((n, round_of(ctx, args.device, n, root, isolate)))
    rows = []
    for n in args.together:
        kids = [k for m, ks in results if m == n for k in ks]
        row: dict[str, Any] = {"started together": n, "runners": len(kids)}
        row["fork to entry, s"] = round(statistics.median(k["to_entry"] for k in kids), 3)
        for i, step in enumerate(STEPS):
            row[f"{step}, s"] = round(statistics.median(k["steps"][i] for k in kids), 3)
        row["spawn to ready, median s"] = round(statistics.median(k["spawn_to_ready"] for k in kids), 3)
        row["spawn to ready, max s"] = round(max(k["spawn_to_ready"] for k in kids), 3)
        rows.append(row)
        print(row, flush=True)
    shutil.rmtree(root, ignore_errors=True)
    keys = list(rows[0])
    lines = [f"# Runner start by step ({args.device}, isolation {'on' if isolate else 'off'}, medians)", ""]
    lines += ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    write_report(args.out, "runner_start", rows, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
