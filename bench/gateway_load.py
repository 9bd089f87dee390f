"""Gateway under load, on loopback: submission latency and throughput from `wrk` (a real load generator)
at fixed rates, and the time to accept batches of 512, against the real gateway and a real Redis (AOF).

    apt-get install wrk
    python -m bench.gateway_load --out OUTDIR --rates 100 200 400 0

Every request is a distinct submission (the Lua script numbers each solution), so none is answered from
the duplicate cache. No workers run: this measures accepting, not evaluating. The per-key rate limit is
off (it would cap one key at 50/s) and so is the tenant's in-flight quota (nothing drains the queue in
this benchmark, so one tenant's jobs pile up past the default 8,192); everything else is the gateway's
default configuration. `wrk` paces
each connection with a fixed delay, so a rate is approximate; the achieved rate is reported. Rate 0 is
an unpaced run: the gateway's ceiling on this machine, with the load generator on the same cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from evalsvc.stack import Stack

TASK = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(1024)]


def get_init_inputs():
    return []
"""

SOLUTION = "import torch\\n\\nclass ModelNew(torch.nn.Module):\\n    pass\\n# variant "

LUA = r"""
local counter = 0
local thread_id = 0
local delay_ms = tonumber(os.getenv("BENCH_DELAY_MS") or "0")
local task_id = os.getenv("BENCH_TASK_ID")
local key = os.getenv("BENCH_KEY")
local prefix = os.getenv("BENCH_PREFIX")
function setup(thread)
  thread:set("thread_id", counter)
  counter = counter + 1
end
function request()
  counter = counter + 1
  local body = '{"task_id":"' .. task_id .. '","solution":{"files":{"solution.py":"' .. SOLUTION ..
    prefix .. '-' .. thread_id .. '-' .. counter .. '\\n"}}}'
  return wrk.format("POST", "/v1/evaluations",
    {["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. key}, body)
end
function delay()
  return delay_ms
end
function done(summary, latency, requests)
  local codes = 0
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_us":%d,"non_2xx":%d,"connect_err":%d,"read_err":%d,' ..
    '"timeout_err":%d,"p50_ms":%.3f,"p90_ms":%.3f,"p99_ms":%.3f,"max_ms":%.3f,"mean_ms":%.3f}\n',
    summary.requests, summary.duration, summary.errors.status, summary.errors.connect,
    summary.errors.read, summary.errors.timeout, latency:percentile(50) / 1000,
    latency:percentile(90) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    latency.mean / 1000))
end
""".replace("SOLUTION", f"[[{SOLUTION}]]")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_wrk(url: str, task_id: str, rate: float, conns: int, seconds: int, script: Path) -> dict:
    """One wrk run at about `rate` submissions/s over `conns` connections (0: as fast as it can)."""
    delay = 0 if rate <= 0 else max(0, int(1000 * conns / rate) - 2)  # ~2 ms service time per request
    env = dict(
        os.environ,
        BENCH_DELAY_MS=str(delay),
        BENCH_TASK_ID=task_id,
        BENCH_KEY="bench-key",
        BENCH_PREFIX=f"r{rate}-{time.time_ns()}",
    )
    cmd = ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--timeout", "5s", "-s", str(script), url]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=seconds + 60)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("WRK_JSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk gave no summary: {done.stdout[-1000:]} {done.stderr[-1000:]}")
    out = json.loads(line[len("WRK_JSON ") :])
    out.update(
        target_rate=rate, connections=conns, achieved_rate=out["requests"] / (out["duration_us"] / 1e6)
    )
    return out


def batch_times(base: str, task_id: str, size: int, repeats: int) -> list[float]:
    times = []
    with httpx.Client(base_url=base, headers={"Authorization": "Bearer bench-key"}, timeout=60) as c:
        for r in range(repeats):
            body = {
                "evaluations": [
                    {
                        "task_id": task_id,
                        "solution": {"files": {"solution.py": f"{SOLUTION}b{r}-{i}-{time.time_ns()}\n"}},
                    }
                    for i in range(size)
                ]
            }
            t = time.perf_counter()
            resp = c.post("/v1/batches", json=body)
            times.append(time.perf_counter() - t)
            if resp.status_code >= 300:
                raise RuntimeError(f"batch refused: {resp.status_code} {resp.text[:500]}")
    return times


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rates", type=float, nargs="*", default=[100, 200, 400, 0])
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--batch-repeats", type=int, default=5)
    args = ap.parse_args()
    if shutil.which("wrk") is None:
        print("wrk is not installed: apt-get install wrk")
        return 2
    data = Path(tempfile.mkdtemp(prefix="evalsvc-gwbench-"))
    (data / "logs").mkdir()
    rport, gport = free_port(), free_port()
    stack = Stack(data_dir=data, redis_url=f"redis://127.0.0.1:{rport}/0", port=gport)
    gateway = None
    try:
        stack.start_redis()
        env = {
            **os.environ,
            "EVALSVC_REDIS_URL": stack.redis_url,
            "EVALSVC_DATA_DIR": str(data),
            "EVALSVC_API_KEYS": json.dumps({"bench-key": "bench"}),
            "EVALSVC_RATE_LIMIT_PER_S": "0",
            "EVALSVC_MAX_INFLIGHT_PER_TENANT": "1000000",  # nothing drains the queue here
            "EVALSVC_LOG_LEVEL": "WARNING",
        }
        log = open(data / "logs" / "gateway.log", "ab")  # noqa: SIM115 - closed with the process
        gateway = subprocess.Popen(
            [sys.executable, "-m", "evalsvc.cli", "serve", "--port", str(gport)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{gport}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(base + "/livez", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or gateway.poll() is not None:
                raise RuntimeError(
                    "gateway did not start: " + (data / "logs" / "gateway.log").read_text()[-2000:]
                )
            time.sleep(0.2)
        r = httpx.post(
            base + "/v1/tasks",
            json={"source": TASK, "name": "bench-relu"},
            headers={"Authorization": "Bearer bench-key"},
        )
        r.raise_for_status()
        task_id = r.json()["id"]
        script = data / "submit.lua"
        script.write_text(LUA)
        run_wrk(base, task_id, 50, 4, 3, script)  # warm-up
        runs = []
        for rate in args.rates:
            res = run_wrk(base, task_id, rate, args.connections, args.seconds, script)
            print(json.dumps(res), flush=True)
            runs.append(res)
        batches = batch_times(base, task_id, args.batch, args.batch_repeats)
    finally:
        if gateway is not None:
            gateway.terminate()
            gateway.wait(10)
        stack.stop()
    lines = [
        f"# Gateway under load ({os.uname().nodename}, {os.cpu_count()} CPUs; wrk, gateway, Redis on the "
        "same machine, loopback)",
        "",
        "| target rate /s | achieved /s | connections | requests | non-2xx | errors | p50 ms | p90 ms "
        "| p99 ms | max ms |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for x in runs:
        errs = x["connect_err"] + x["read_err"] + x["timeout_err"]
        lines.append(
            f"| {x['target_rate'] or 'unpaced'} | {x['achieved_rate']:.0f} | {x['connections']} | "
            f"{x['requests']} | {x['non_2xx']} | {errs} | {x['p50_ms']:.1f} | {x['p90_ms']:.1f} | "
            f"{x['p99_ms']:.1f} | {x['max_ms']:.1f} |"
        )
    lines += [
        "",
        f"Batch of {args.batch} (POST /v1/batches, {args.batch_repeats} times): median "
        f"{statistics.median(batches) * 1e3:.0f} ms, max {max(batches) * 1e3:.0f} ms "
        f"({', '.join(f'{b * 1e3:.0f}' for b in batches)} ms).",
    ]
    text = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gateway_load.md").write_text(text)
    (args.out / "gateway_load.json").write_text(json.dumps({"runs": runs, "batch_s": batches}, indent=1))
    print(text)
    shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
