"""Redis commands and CPU per evaluation, counted on a real stack (`evalsvc up`'s: Redis, gateway, compile
worker in Docker, one CPU-device worker) by INFO commandstats around a batch.

    python -m bench.redis_per_eval --out OUTDIR --evals 8

One evaluation of the bundled CPU ReLU first (the cold build and the baselines), then `--evals` of the same
solution with distinct options (distinct jobs, each a compile-cache hit): the counts cover submission,
compile stage, device stage and the broker, per evaluation. The workers' idle traffic (heartbeats, broker
polls), measured over `--idle-s` before the batch, is taken off at its rate; BRPOP (a worker's blocking pop
while it waits for work) is left out, since busy workers do not send it. Completion is watched with one
HGET per job per second from this script's own connection, counted and taken off too; INFO itself is left
out. That count is an upper bound: traffic that only busy workers send by the clock (heartbeats over an
evaluation's wall time, which on this CPU is about a minute and on a GPU a third of a second) stays in.
So the rate of commands is also measured over `--idle-s` while the device runs the batch's last
evaluation and nothing else moves, and taken off instead: the second count. No long-polls: a waiting
client's ticks are measured by bench/capacity_load.py.
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


class Watch:
    """Each job's state, read once a second from this script's own connection (the HGETs are counted, to
    be taken off); while the device runs the batch's last evaluation and nothing else moves, the commands
    sent over `window_s`: the traffic busy workers send by the clock."""

    def __init__(self, r: redis.Redis, window_s: float) -> None:
        self.r, self.window_s, self.hgets = r, window_s, 0
        self.busy: dict[str, float] | None = None

    def states(self, ids: list[str]) -> list[str]:
        self.hgets += len(ids)
        docs = [self.r.hget(job_key(i), "doc") for i in ids]
        return [json.loads(d)["state"] if d else "missing" for d in docs]

    def until_done(self, ids: list[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while (left := [i for i, st in zip(ids, self.states(ids), strict=True) if st != "done"]) != []:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(left)} evaluations not done after {timeout:.0f} s")
            if self.busy is None and len(left) == 1 and len(ids) > 1 and self.states(left) == ["running"]:
                self.measure_busy(left[0])
            time.sleep(1)

    def measure_busy(self, job_id: str) -> None:
        before = snapshot(self.r)
        time.sleep(self.window_s)
        after = snapshot(self.r)
        if self.states([job_id]) == ["running"]:  # still the one evaluation running: a clean window
            self.busy = {k: (after[k] - before[k]) / self.window_s for k in after if after[k] != before[k]}


def per_evaluation(
    calls: Counter[str], rate: dict[str, float], wall: float, hgets: int, evals: int
) -> dict[str, float]:
    """The batch's commands less `rate` over its wall time and this script's HGETs, per evaluation."""
    per = {}
    for k in calls:
        n = calls[k] - rate.get(k, 0) * wall - (hgets if k == "hget" else 0)
        if k not in LEFT_OUT and abs(n) > 1e-9:
            per[k] = round(n / evals, 2)
    return dict(sorted(per.items(), key=lambda kv: -kv[1]))


def measure(
    client: Client, r: redis.Redis, task_id: str, evals: int, idle_s: float, timeout: float
) -> dict[str, Any]:
    solution = read_solution(EXAMPLE / "cpu_ok.py")
    first = client.submit(task_id, solution, EvalOptions(**QUICK))
    Watch(r, idle_s).until_done([first.id], timeout)
    calls0 = snapshot(r)
    time.sleep(idle_s)
    calls1 = snapshot(r)
    idle = {k: (calls1[k] - calls0[k]) / idle_s for k in calls1 if calls1[k] != calls0[k]}
    start, watch = time.monotonic(), Watch(r, idle_s)
    reqs = [
        client.submit(task_id, solution, EvalOptions(**{**QUICK, "timing_budget_s": 0.2 + (i + 1) / 1000}))
        for i in range(evals)
    ]
    jobs = len({v.id for v in reqs} - {first.id})  # distinct new jobs: a duplicate shares one and costs less
    watch.until_done([v.id for v in reqs], timeout)
    wall = time.monotonic() - start
    calls2 = snapshot(r)
    batch = Counter({k: calls2[k] - calls1[k] for k in calls2 if calls2[k] != calls1[k]})
    # the busy window's own INFO calls and HGETs are in `batch`: INFO is left out, the HGETs counted
    by_idle = per_evaluation(batch, idle, wall, watch.hgets, jobs)
    by_busy = per_evaluation(batch, watch.busy, wall, watch.hgets, jobs) if watch.busy else None
    return {
        "submissions": evals,
        "evaluations": jobs,
        "wall_s": round(wall, 1),
        "commands_per_evaluation_less_idle": round(sum(by_idle.values()), 1),
        "commands_per_evaluation_less_busy": round(sum(by_busy.values()), 1) if by_busy else None,
        "by_command_less_idle": by_idle,
        "by_command_less_busy": by_busy,
        "idle_commands_per_s": {k: round(v, 2) for k, v in sorted(idle.items()) if k not in LEFT_OUT},
        "busy_commands_per_s": (
            {k: round(v, 2) for k, v in sorted(watch.busy.items()) if k not in LEFT_OUT}
            if watch.busy
            else None
        ),
        "batch_calls": dict(sorted(batch.items())),
        "watch_hgets": watch.hgets,
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
