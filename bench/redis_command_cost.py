"""Redis CPU per command on this machine: `redis-benchmark` (16 clients; one command per round trip, then
16 pipelined) against a fresh redis-server run as evalsvc runs it (AOF, fsync every second), with INFO cpu
read before and after each.

    python -m bench.redis_command_cost --out OUTDIR
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

from bench.gateway_load import free_port
from evalsvc.stack import redis_command

COMMANDS = "set,get,hset,lpush,zadd"


def cpu_s(r: redis.Redis) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def measure(port: int, pipeline: int, requests: int) -> dict[str, float]:
    r = redis.Redis(port=port)
    c0, n0 = cpu_s(r), int(r.info("stats")["total_commands_processed"])
    argv = ["redis-benchmark", "-p", str(port), "-c", "16", "-n", str(requests), "-P", str(pipeline), "-q"]
    subprocess.run([*argv, "-t", COMMANDS], check=True, capture_output=True, timeout=600)
    c1, n1 = cpu_s(r), int(r.info("stats")["total_commands_processed"])
    return {
        "commands": n1 - n0,
        "cpu_s": round(c1 - c0, 3),
        "us_per_command": round(1e6 * (c1 - c0) / (n1 - n0), 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--requests", type=int, default=200_000, help="per command type")
    args = ap.parse_args()
    port, data = free_port(), Path(tempfile.mkdtemp(prefix="evalsvc-redis-cost-"))
    server = subprocess.Popen(redis_command(port, data), stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not _up(port):
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.2)
        out = {f"pipeline_{p}": measure(port, p, args.requests) for p in (1, 16)}
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(data, ignore_errors=True)
    print(json.dumps(out))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "redis_command_cost.json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


def _up(port: int) -> bool:
    try:
        return bool(redis.Redis(port=port).ping())
    except redis.ConnectionError:
        return False


if __name__ == "__main__":
    sys.exit(main())
