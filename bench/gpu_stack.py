"""The whole stack on this machine (Redis, gateway, compile worker, one worker per GPU), and the bundled
suite for this device evaluated over HTTP as one batch.

    python -m bench.gpu_stack --out OUTDIR
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from bench.report import write_report
from evalsvc.core.options import EvalOptions
from evalsvc.records.documents import EvaluationRequest
from evalsvc.sdk import Client
from evalsvc.stack import Stack, visible_gpus
from evalsvc.suite import cases


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data-dir", type=Path, default=Path("var/bench"))
    ap.add_argument("--port", type=int, default=8765)
    args = ap.parse_args()
    data = args.data_dir.resolve()
    (data / "logs").mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("EVALSVC_COMPILE_BACKEND", "process")
    stack = Stack(data_dir=data, redis_url="redis://127.0.0.1:6399/0", port=args.port)
    gpus = visible_gpus()
    kind = "cuda" if gpus else "cpu"
    t0 = time.monotonic()
    rows = []
    try:
        stack.start_redis()
        stack.start_services(gpus)
        stack.wait_ready(600)
        print(f"stack ready in {time.monotonic() - t0:.0f} s with {len(gpus)} GPU worker(s)", flush=True)
        selected = cases(kind)
        with Client(f"http://127.0.0.1:{args.port}") as client:
            reqs = [
                EvaluationRequest(
                    task=c.task(), solution=c.solution(), options=EvalOptions(timing_budget_s=1.0)
                )
                for c in selected
            ]
            t1 = time.monotonic()
            batch_id = client.submit_batch(reqs)
            print(f"batch of {len(reqs)} accepted in {time.monotonic() - t1:.3f} s", flush=True)
            view = client.batch(batch_id, wait=30)
            while view.done < view.total and time.monotonic() - t1 < 480:
                stack.check_alive()
                view = client.batch(batch_id, wait=30)
            for c, item in zip(selected, view.items, strict=True):
                rows.append(
                    {
                        "solution": c.name,
                        "expect": c.expect,
                        "state": item.state,
                        "status": item.status,
                        "reward": item.reward,
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
    finally:
        stack.stop()
        for log in (data / "logs").glob("*.log"):
            (args.out / f"stack-{log.name}").write_bytes(
                log.read_bytes()[-200_000:]
            ) if args.out.exists() else None
    lines = ["| solution | expected | status | reward |", "|---|---|---|---|"]
    lines += [f"| {r['solution']} | {r['expect']} | {r['status']} | {r['reward']} |" for r in rows]
    write_report(args.out, "stack", rows, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
