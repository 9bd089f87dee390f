"""The gateway and Redis at a fleet's request rates: submissions and long-polls from an async httpx client
against the real gateway (`evalsvc serve`) and a real redis-server (AOF), on this machine.

    python -m bench.capacity_load --out OUTDIR --sim docs/results/.../capacity.json --seconds 30

Three phases, each `--seconds` long: `submit` (submissions only, paced at `--rate` items/s in batches of
`--batch-size`; 1 = POST /v1/evaluations), `poll` (`--pollers` long-polls held open all the time, each on
its own batch of `--poll-batch` items, `?wait=--poll-wait` as the SDK sends it) and `mixed` (both). No
workers run, so nothing finishes: every long-poll lasts its whole wait and the gateway reads the batch's
items from Redis on every tick (`evalsvc.api.polling`), which is the load a trainer waiting on a step
makes. `--sim` takes the rate, batch size and polls from the simulation's `load_test` block (its
128-GPU case). Per phase: achieved rates, p50/p99 latency per endpoint (a long-poll's latency less its
wait), errors, Redis CPU (INFO cpu) and commands, the gateway's CPU, this client's and everything else's
on the machine (other work shares these cores: the CPU of others is reported, not subtracted).

The per-key rate limit and the tenant's in-flight quota are off, as in bench/gateway_load.py (nothing
drains the queue here; one trainer's key at 410 submissions/s would pass the default 50/s limit).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import redis

from bench.gateway_load import create_task, free_port, gateway_env, start_gateway, stop_gateway, wait_live
from evalsvc.stack import Stack

SOLUTION = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n# variant {}\n"


@dataclass
class Load:
    rate: float  # items submitted per second (0: no submissions)
    batch_size: int  # 1: single submissions
    pollers: int  # long-polls held open at once (0: none)
    poll_batch: int  # items in each polled batch (1: single evaluations)
    poll_wait: float
    concurrency: int  # submissions in flight at most


@dataclass
class Latencies:
    ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    kinds: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # "endpoint: status or exception"
    items: int = 0

    def error(self, name: str, what: object) -> None:
        self.errors[name] += 1
        self.kinds[f"{name}: {what}"] += 1

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in sorted(set(self.ms) | set(self.errors)):
            xs = sorted(self.ms[name])
            out[name] = {
                "requests": len(xs),
                "errors": self.errors[name],
                "p50_ms": round(statistics.median(xs), 2) if xs else None,
                "p99_ms": round(xs[min(len(xs) - 1, int(0.99 * len(xs)))], 2) if xs else None,
                "error_kinds": {
                    k.split(": ", 1)[1]: v for k, v in self.kinds.items() if k.startswith(name + ": ")
                },
            }
        return out


class Counters:
    """CPU seconds and Redis commands, read before and after a phase."""

    def __init__(self, r: redis.Redis, gateway_pid: int) -> None:
        self.r, self.gateway, self.me = r, psutil.Process(gateway_pid), psutil.Process()

    def read(self) -> dict[str, float]:
        cpu, stats, cmds = self.r.info("cpu"), self.r.info("stats"), self.r.info("commandstats")
        machine = psutil.cpu_times()
        gw = [self.gateway, *self.gateway.children(recursive=True)]
        return {
            "t": time.monotonic(),
            "redis_cpu_s": float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]),
            "redis_commands": float(stats["total_commands_processed"]),
            "redis_hmget": float(cmds.get("cmdstat_hmget", {}).get("calls", 0)),
            "gateway_cpu_s": sum(p.cpu_times().user + p.cpu_times().system for p in gw),
            "client_cpu_s": self.me.cpu_times().user + self.me.cpu_times().system,
            "machine_busy_s": machine.user + machine.nice + machine.system + machine.irq + machine.softirq,
        }


async def submit(c: httpx.AsyncClient, task_id: str, first: int, n: int, lat: Latencies) -> str | None:
    """One submission of `n` distinct items; returns its batch or evaluation id."""
    evals = [
        {"task_id": task_id, "solution": {"files": {"solution.py": SOLUTION.format(first + i)}}}
        for i in range(n)
    ]
    name = "POST /v1/evaluations" if n == 1 else "POST /v1/batches"
    t = time.perf_counter()
    try:
        resp = await (
            c.post("/v1/evaluations", json=evals[0])
            if n == 1
            else c.post("/v1/batches", json={"evaluations": evals})
        )
    except httpx.HTTPError as e:
        lat.error(name, type(e).__name__)
        return None
    lat.ms[name].append((time.perf_counter() - t) * 1e3)
    if resp.status_code >= 300:
        lat.error(name, resp.status_code)
        return None
    lat.items += n
    return str(resp.json()["id"])


async def submitter(
    c: httpx.AsyncClient, task_id: str, load: Load, until: float, lat: Latencies, tag: int
) -> None:
    """Open loop: submission k is due at start + k * batch_size / rate, at most `concurrency` in flight."""
    gate = asyncio.Semaphore(load.concurrency)
    start, k, running = time.monotonic(), 0, set()

    async def one(first: int) -> None:
        try:
            await submit(c, task_id, first, load.batch_size, lat)
        finally:
            gate.release()

    while True:
        due = start + k * load.batch_size / load.rate
        if due >= until:
            break
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        await gate.acquire()
        task = asyncio.create_task(one(tag + k * load.batch_size))
        running.add(task)
        task.add_done_callback(running.discard)
        k += 1
    await asyncio.gather(*running)


async def poller(c: httpx.AsyncClient, target: str, load: Load, until: float, lat: Latencies) -> None:
    """Long-poll one batch (or evaluation) again and again, as SDK's wait_batch / wait does."""
    path = f"/v1/batches/{target}" if load.poll_batch > 1 else f"/v1/evaluations/{target}"
    name = f"GET {path.rsplit('/', 1)[0]}/{{id}}?wait={load.poll_wait:g} (less the wait)"
    while time.monotonic() < until:
        wait = min(load.poll_wait, max(0.0, until - time.monotonic()))
        t = time.perf_counter()
        try:
            resp = await c.get(path, params={"wait": wait}, timeout=wait + 60)
        except httpx.HTTPError as e:
            lat.error(name, type(e).__name__)
            continue
        lat.ms[name].append(max(0.0, (time.perf_counter() - t - wait) * 1e3))
        if resp.status_code != 200:
            lat.error(name, resp.status_code)


async def phase(
    base: str, task_id: str, load: Load, seconds: float, targets: list[str], tag: int
) -> Latencies:
    lat = Latencies()
    limits = httpx.Limits(max_connections=load.concurrency + load.pollers + 4)
    headers = {"Authorization": "Bearer bench-key"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60, limits=limits) as c:
        until = time.monotonic() + seconds
        jobs = [poller(c, t, load, until, lat) for t in targets[: load.pollers]]
        if load.rate > 0:
            jobs.append(submitter(c, task_id, load, until, lat, tag))
        await asyncio.gather(*jobs)
    return lat


def poll_targets(base: str, task_id: str, load: Load, tag: int) -> list[str]:
    """One batch (or evaluation) per poller, submitted before the phase."""
    lat = Latencies()

    async def make() -> list[str | None]:
        async with httpx.AsyncClient(
            base_url=base, headers={"Authorization": "Bearer bench-key"}, timeout=120
        ) as c:
            return [
                await submit(c, task_id, tag + k * load.poll_batch, load.poll_batch, lat)
                for k in range(load.pollers)
            ]

    ids = asyncio.run(make())
    if any(i is None for i in ids):
        raise RuntimeError(f"could not submit the polled batches: {dict(lat.errors)}")
    return [i for i in ids if i is not None]


def deltas(before: dict[str, float], after: dict[str, float], lat: Latencies) -> dict[str, Any]:
    d = {k: after[k] - before[k] for k in before}
    wall = d.pop("t")
    ours = d["redis_cpu_s"] + d["gateway_cpu_s"] + d["client_cpu_s"]
    return {
        "wall_s": round(wall, 2),
        "items_submitted": lat.items,
        "items_per_s": round(lat.items / wall, 1),
        "redis_cpu_fraction": round(d["redis_cpu_s"] / wall, 4),
        "redis_commands_per_s": round(d["redis_commands"] / wall, 1),
        "redis_hmget_per_s": round(d["redis_hmget"] / wall, 1),
        "gateway_cpu_fraction": round(d["gateway_cpu_s"] / wall, 4),
        "client_cpu_fraction": round(d["client_cpu_s"] / wall, 4),
        "others_cpu_fraction": round((d["machine_busy_s"] - ours) / wall, 4),
        "raw": {k: round(v, 4) for k, v in d.items()},
        "endpoints": lat.summary(),
        "errors": sum(lat.errors.values()),
    }


def run_phase(
    name: str, load: Load, seconds: float, base: str, task_id: str, counters: Counters
) -> dict[str, Any]:
    tag = time.time_ns() % 10**12  # distinct solutions in every phase and run
    targets = poll_targets(base, task_id, load, tag + 10**13) if load.pollers else []
    before = counters.read()
    lat = asyncio.run(phase(base, task_id, load, seconds, targets, tag))
    out = {"phase": name, "load": load.__dict__, **deltas(before, counters.read(), lat)}
    print(json.dumps({k: v for k, v in out.items() if k != "raw"}), flush=True)
    return out


COLUMNS = ("Redis CPU", "Redis cmds/s", "HMGET/s", "gateway CPU", "client CPU", "others' CPU")


def report(doc: dict[str, Any]) -> str:
    lines = [
        f"# Gateway and Redis at a fleet's rates ({doc['machine']}, commit {doc['commit']})",
        "",
        f"Command: `{doc['command']}`. Load average before: {doc['loadavg_before']}, "
        f"after: {doc['loadavg_after']}.",
        "",
        "| phase | items/s | endpoint | requests | errors | p50 ms | p99 ms | " + " | ".join(COLUMNS) + " |",
        "|---" * (7 + len(COLUMNS)) + "|",
    ]
    for p in doc["phases"]:
        cells = [
            f"{p['redis_cpu_fraction']:.1%}",
            f"{p['redis_commands_per_s']:.0f}",
            f"{p['redis_hmget_per_s']:.0f}",
            f"{p['gateway_cpu_fraction']:.1%}",
            f"{p['client_cpu_fraction']:.1%}",
            f"{p['others_cpu_fraction']:.1%}",
        ]
        for i, (ep, s) in enumerate(p["endpoints"].items()):
            first = [p["phase"], str(p["items_per_s"])] if i == 0 else ["", ""]
            row = [*first, ep, str(s["requests"]), str(s["errors"]), str(s["p50_ms"]), str(s["p99_ms"])]
            lines.append("| " + " | ".join(row + (cells if i == 0 else [""] * len(cells))) + " |")
    return "\n".join(lines) + "\n"


def loads(args: argparse.Namespace) -> dict[str, Load]:
    rate, batch, pollers, poll_batch = args.rate, args.batch_size, args.pollers, args.poll_batch
    if args.sim:
        sim = json.loads(args.sim.read_text())["load_test"]
        rate, batch, pollers, poll_batch = (
            sim["submissions_per_s"],
            sim["batch_size"],
            sim["batch_polls_in_flight"],
            sim["batch_size"],
        )
    common = {"poll_wait": args.poll_wait, "concurrency": args.concurrency}
    return {
        "submit": Load(rate, batch, 0, poll_batch, **common),
        "poll": Load(0, batch, pollers, poll_batch, **common),
        "mixed": Load(rate, batch, pollers, poll_batch, **common),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--sim", type=Path, help="capacity.json from bench.capacity_sim: its load_test rates")
    ap.add_argument("--rate", type=float, default=410.0, help="items submitted per second")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--pollers", type=int, default=1)
    ap.add_argument("--poll-batch", type=int, default=1024)
    ap.add_argument("--poll-wait", type=float, default=30.0, help="the SDK's wait_batch poll (30 s)")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--phases", nargs="*", default=["submit", "poll", "mixed"])
    args = ap.parse_args()
    plan = loads(args)
    data = Path(tempfile.mkdtemp(prefix="evalsvc-capload-"))
    (data / "logs").mkdir()
    stack = Stack(data_dir=data, redis_url=f"redis://127.0.0.1:{free_port()}/0", port=free_port())
    root = Path(__file__).resolve().parents[1]
    doc: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, "-m", "bench.capacity_load", *sys.argv[1:]]),
        "commit": subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "machine": f"{os.uname().nodename}, {os.cpu_count()} CPUs",
        "loadavg_before": os.getloadavg(),
        "phases": [],
    }
    gateway = None
    try:
        stack.start_redis()
        log_path = data / "logs" / "gateway.log"
        gateway = start_gateway(gateway_env(stack, data), stack.port, log_path, 1)
        base = f"http://127.0.0.1:{stack.port}"
        wait_live(base, gateway, log_path)
        task_id = create_task(base)
        asyncio.run(phase(base, task_id, Load(50, 1, 0, 1, 0, 4), 1.0, [], 0))  # warm-up
        counters = Counters(redis.Redis.from_url(stack.redis_url), gateway.pid)
        for name in args.phases:
            doc["phases"].append(run_phase(name, plan[name], args.seconds, base, task_id, counters))
    finally:
        if gateway is not None:
            stop_gateway(gateway)
        stack.stop()
        if any(p["errors"] for p in doc["phases"]):  # why, in the gateway's words
            doc["gateway_log_tail"] = (data / "logs" / "gateway.log").read_text(errors="replace")[-4000:]
        shutil.rmtree(data, ignore_errors=True)
    doc["loadavg_after"] = os.getloadavg()
    text = report(doc)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "capacity_load.json").write_text(json.dumps(doc, indent=1) + "\n")
        (args.out / "capacity_load.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
