"""Redis commands and CPU per evaluation, counted on a real stack (`evalsvc up`'s: Redis, gateway, compile
worker in Docker, one CPU-device worker) by INFO commandstats around a batch.

    python -m bench.redis_per_eval --out OUTDIR --evals 8

One evaluation of the bundled CPU ReLU first (the cold build and the baselines), then `--evals` of the same
solution with distinct options (distinct jobs, each a compile-cache hit): the counts cover submission,
compile stage, device stage and the broker, per evaluation. The workers' idle traffic (heartbeats, broker
polls), measured over `--idle-s` before the batch, is taken off at its rate; BRPOP (a worker's blocking pop
while it waits for work) is left out, since busy workers do not send it. Completion is watched with one
HGET per job per second from this script's own connection, counted and taken off too; INFO itself is left
out. What stays in is an upper bound: time-driven traffic that only busy workers send (heartbeats over an
evaluation's wall time, which on this CPU is about a minute and on a GPU a third of a second) counts as
per-evaluation. No long-polls: a waiting client's ticks are measured by bench/capacity_load.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import redis

from bench.gateway_load import free_port
from evalsvc.cli_files import read_solution, read_task
from evalsvc.core.options import EvalOptions
from evalsvc.records.keys import job_key
from evalsvc.sdk import Client
from evalsvc.stack import Stack

EXAMPLE = Path(__file__).resolve().parents[1] / "evalsvc" / "examples" / "l1" / "relu"
QUICK = {"trials": 2, "timing_budget_s": 0.2, "compile_baseline": False}


LEFT_OUT = ("info", "brpop")


def snapshot(r: redis.Redis) -> Counter[str]:
    stats = r.info("commandstats")
    return Counter({k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()})


def wait_done(r: redis.Redis, ids: list[str], timeout: float) -> int:
    """Poll each job's document once a second until all are done; returns the HGETs sent."""
    sent, deadline = 0, time.monotonic() + timeout
    left = set(ids)
    while left:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(left)} evaluations not done after {timeout:.0f} s")
        time.sleep(1)
        for i in list(left):
            sent += 1
            doc = r.hget(job_key(i), "doc")
            if doc and json.loads(doc)["state"] == "done":
                left.discard(i)
    return sent


def measure(
    client: Client, r: redis.Redis, task_id: str, evals: int, idle_s: float, timeout: float
) -> dict[str, Any]:
    solution = read_solution(EXAMPLE / "cpu_ok.py")
    first = client.submit(task_id, solution, EvalOptions(**QUICK))
    wait_done(r, [first.id], timeout)
    calls0 = snapshot(r)
    time.sleep(idle_s)
    calls1 = snapshot(r)
    idle = {k: (calls1[k] - calls0[k]) / idle_s for k in calls1 if calls1[k] != calls0[k]}
    start = time.monotonic()
    reqs = [
        client.submit(task_id, solution, EvalOptions(**{**QUICK, "timing_budget_s": 0.2 + i / 1000}))
        for i in range(evals)
    ]
    hgets = wait_done(r, [v.id for v in reqs], timeout)
    wall = time.monotonic() - start
    calls2 = snapshot(r)
    per: dict[str, float] = {}
    for k in calls2:
        n = calls2[k] - calls1[k] - idle.get(k, 0) * wall - (hgets if k == "hget" else 0)
        if k not in LEFT_OUT and abs(n) > 1e-9:
            per[k] = round(n / evals, 2)
    return {
        "evaluations": evals,
        "wall_s": round(wall, 1),
        "commands_per_evaluation": round(sum(per.values()), 1),
        "by_command": dict(sorted(per.items(), key=lambda kv: -kv[1])),
        "idle_commands_per_s": {k: round(v, 2) for k, v in sorted(idle.items()) if k != "info"},
        "batch_calls": {k: calls2[k] - calls1[k] for k in sorted(calls2) if calls2[k] != calls1[k]},
        "watch_hgets": hgets,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--evals", type=int, default=8)
    ap.add_argument("--idle-s", type=float, default=20.0)
    ap.add_argument("--timeout", type=float, default=1200.0)
    args = ap.parse_args()
    data = Path(tempfile.mkdtemp(prefix="evalsvc-redis-per-eval-"))
    os.chmod(data, 0o755)  # the runner drops to a uid of its own and must reach its files
    (data / "logs").mkdir()
    stack = Stack(
        data_dir=data,
        redis_url=f"redis://127.0.0.1:{free_port()}/0",
        port=free_port(),
        metrics_port=free_port(),
        prometheus_port=free_port(),
        api_keys={"bench-key": "bench"},
    )
    try:
        stack.start_redis()
        stack.start_services([])
        stack.wait_ready()
        r = redis.Redis.from_url(stack.redis_url)
        with Client(f"http://127.0.0.1:{stack.port}", "bench-key", timeout=120) as client:
            task_id = client.register_task(read_task(EXAMPLE / "task.py"))
            out = measure(client, r, task_id, args.evals, args.idle_s, args.timeout)
    finally:
        stack.stop()
        shutil.rmtree(data, ignore_errors=True)
    root = Path(__file__).resolve().parents[1]
    out["commit"] = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    out["command"] = " ".join(["python", "-m", "bench.redis_per_eval", *sys.argv[1:]])
    out["loadavg_after"] = os.getloadavg()
    print(json.dumps(out, indent=1))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "redis_per_eval.json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
