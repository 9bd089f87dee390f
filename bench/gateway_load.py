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

    python -m bench.gateway_load --out OUTDIR --rates 200 0 --rounds 3 --compare HEAD~1

`--compare REV` runs a second gateway from a temporary `git worktree` of REV ("base") beside the working
tree's ("head"), on the same Redis, and alternates between them (ABBA over rounds), because run-to-run
noise on a small VM is larger than most changes: only ratios from one interleaved run mean anything.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
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


def gateway_env(stack: Stack, data: Path) -> dict[str, str]:
    """The gateway's defaults, less the two limits that would cap this benchmark (see the module doc)."""
    return {
        **os.environ,
        "EVALSVC_REDIS_URL": stack.redis_url,
        "EVALSVC_DATA_DIR": str(data),
        "EVALSVC_API_KEYS": json.dumps({"bench-key": "bench"}),
        "EVALSVC_RATE_LIMIT_PER_S": "0",
        "EVALSVC_MAX_INFLIGHT_PER_TENANT": "1000000",  # nothing drains the queue here
        "EVALSVC_LOG_LEVEL": "WARNING",
    }


def start_gateway(
    env: dict[str, str], port: int, log_path: Path, workers: int, cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    """`evalsvc serve` as a child; `cwd` (with PYTHONPATH) picks which checkout's evalsvc it runs."""
    log = open(log_path, "ab")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        [sys.executable, "-m", "evalsvc.cli", "serve", "--port", str(port), "--workers", str(workers)],
        env=env,
        cwd=cwd,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def wait_live(base: str, gateway: subprocess.Popen[bytes], log_path: Path) -> None:
    """Block until /livez answers, failing fast (with the log) if the gateway exits or never comes up."""
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(base + "/livez", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or gateway.poll() is not None:
            raise RuntimeError("gateway did not start: " + log_path.read_text()[-2000:])
        time.sleep(0.2)


def stop_gateway(gateway: subprocess.Popen[bytes]) -> None:
    gateway.terminate()
    gateway.wait(10)


def create_task(base: str) -> str:
    r = httpx.post(
        base + "/v1/tasks",
        json={"source": TASK, "name": "bench-relu"},
        headers={"Authorization": "Bearer bench-key"},
    )
    r.raise_for_status()
    return r.json()["id"]


def write_script(data: Path) -> Path:
    script = data / "submit.lua"
    script.write_text(LUA)
    return script


def machine() -> str:
    return f"{os.uname().nodename}, {os.cpu_count()} CPUs"


def run_single(args: argparse.Namespace, stack: Stack, data: Path) -> str:
    """The one-gateway benchmark: each rate once, then the batches; writes gateway_load.{md,json}."""
    gateway = None
    try:
        stack.start_redis()
        log_path = data / "logs" / "gateway.log"
        gateway = start_gateway(gateway_env(stack, data), stack.port, log_path, args.workers)
        base = f"http://127.0.0.1:{stack.port}"
        wait_live(base, gateway, log_path)
        task_id = create_task(base)
        script = write_script(data)
        run_wrk(base, task_id, 50, 4, 3, script)  # warm-up
        runs = []
        for rate in args.rates:
            res = run_wrk(base, task_id, rate, args.connections, args.seconds, script)
            print(json.dumps(res), flush=True)
            runs.append(res)
        batches = batch_times(base, task_id, args.batch, args.batch_repeats)
    finally:
        if gateway is not None:
            stop_gateway(gateway)
        stack.stop()
    lines = [
        f"# Gateway under load ({machine()}; wrk, gateway, Redis on the same machine, loopback)",
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
    return text


def git(cwd: Path, *argv: str) -> str:
    done = subprocess.run(["git", "-C", str(cwd), *argv], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(argv)}: {done.stderr.strip()}")
    return done.stdout.strip()


def repo_root() -> Path:
    """The checkout this file belongs to, wherever the benchmark is started from."""
    return Path(git(Path(__file__).resolve().parent, "rev-parse", "--show-toplevel"))


@contextlib.contextmanager
def worktree(root: Path, sha: str) -> Iterator[Path]:
    """A detached checkout of `sha` in a temporary directory, removed however the run ends."""
    parent = Path(tempfile.mkdtemp(prefix="evalsvc-gwbench-base-"))
    tree = parent / "tree"
    try:
        git(root, "worktree", "add", "--detach", str(tree), sha)
        yield tree
    finally:
        done = subprocess.run(
            ["git", "-C", str(root), "worktree", "remove", "--force", str(tree)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0 and tree.exists():
            print(f"warning: git worktree remove {tree}: {done.stderr.strip()}", file=sys.stderr)
        shutil.rmtree(parent, ignore_errors=True)


def evalsvc_dir(env: dict[str, str], cwd: Path | None) -> Path:
    """Where `import evalsvc` resolves for a child started like the gateway (the editable install's
    finder would otherwise quietly serve the working tree to the base gateway too)."""
    done = subprocess.run(
        [sys.executable, "-c", "import evalsvc; print(evalsvc.__file__)"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(done.stdout.strip()).resolve().parent


def checked_envs(env: dict[str, str], root: Path, tree: Path) -> dict[str, dict[str, str]]:
    """Per-label env: base gets the worktree first on PYTHONPATH; both checked to import their own code."""
    pythonpath = os.pathsep.join(p for p in (str(tree), env.get("PYTHONPATH", "")) if p)
    envs = {"base": {**env, "PYTHONPATH": pythonpath}, "head": env}
    base_pkg, head_pkg = evalsvc_dir(envs["base"], tree), evalsvc_dir(env, None)
    if not base_pkg.is_relative_to(tree.resolve()):
        raise RuntimeError(f"base gateway would import evalsvc from {base_pkg}, not the worktree {tree}")
    if not head_pkg.is_relative_to(root.resolve()):
        raise RuntimeError(f"head gateway would import evalsvc from {head_pkg}, not the checkout {root}")
    print(f"base imports {base_pkg}\nhead imports {head_pkg}", flush=True)
    return envs


def alternate(
    args: argparse.Namespace, urls: dict[str, str], tasks: dict[str, str], script: Path, revs: dict[str, str]
) -> tuple[list[dict], list[dict]]:
    """Every measurement once per gateway back to back, the order flipped each round (ABBA), so drift in
    the machine (or in the shared Redis as jobs pile up) falls on both alike."""
    runs, batches = [], []
    for rnd in range(args.rounds):
        order = ("base", "head") if rnd % 2 == 0 else ("head", "base")
        for rate in args.rates:
            for label in order:
                res = run_wrk(urls[label], tasks[label], rate, args.connections, args.seconds, script)
                res.update(label=label, round=rnd, rev=revs[label])
                print(json.dumps(res), flush=True)
                runs.append(res)
        for rep in range(args.batch_repeats):
            for label in order if rep % 2 == 0 else order[::-1]:
                (seconds,) = batch_times(urls[label], tasks[label], args.batch, 1)
                batches.append(
                    {"label": label, "round": rnd, "repeat": rep, "rev": revs[label], "s": seconds}
                )
    return runs, batches


def ratio(head: float, base: float) -> str:
    return f"{head / base:.2f}" if base else "n/a"


def rate_table(rate: float, runs: list[dict]) -> list[str]:
    """Medians over rounds for one target rate, base beside head, with head/base."""

    def vals(label: str, key: str) -> list[float]:
        return [x[key] for x in runs if x["label"] == label]

    def med(label: str, key: str) -> float:
        return statistics.median(vals(label, key))

    lines = [
        f"## Target rate {f'{rate:g}' if rate else 'unpaced'} /s",
        "",
        "| median over rounds | base | head | head/base |",
        "|---|---|---|---|",
    ]
    for key, name, fmt in (("achieved_rate", "achieved /s", ".0f"), ("p50_ms", "p50 ms", ".2f")):
        lines.append(
            f"| {name} | {med('base', key):{fmt}} | {med('head', key):{fmt}} | "
            f"{ratio(med('head', key), med('base', key))} |"
        )
    lines.append(
        f"| p99 ms | {med('base', 'p99_ms'):.2f} | {med('head', 'p99_ms'):.2f} | "
        f"{ratio(med('head', 'p99_ms'), med('base', 'p99_ms'))} |"
    )
    by_round = {lb: ", ".join(f"{v:.2f}" for v in vals(lb, "p99_ms")) for lb in ("base", "head")}
    lines.append(f"| p99 ms by round | {by_round['base']} | {by_round['head']} | |")
    bad = {
        lb: sum(
            x["non_2xx"] + x["connect_err"] + x["read_err"] + x["timeout_err"]
            for x in runs
            if x["label"] == lb
        )
        for lb in ("base", "head")
    }
    lines += [f"| non-2xx + errors (all rounds) | {bad['base']} | {bad['head']} | |", ""]
    return lines


def compare_report(args: argparse.Namespace, meta: dict, runs: list[dict], batches: list[dict]) -> str:
    dirty = ", with uncommitted changes" if meta["head_dirty"] else ""
    lines = [
        f"# Gateway A/B: base {args.compare} ({meta['base_sha'][:12]}) vs head (working tree at "
        f"{meta['head_sha'][:12]}{dirty}) ({machine()}; wrk, both gateways, Redis on the same machine, "
        "loopback)",
        "",
        f"Command: `{shlex.join(sys.orig_argv)}`",
        "",
        f"{args.rounds} rounds, base and head alternated ABBA, one Redis for both; {args.connections} "
        f"connections, {args.seconds} s per wrk run. Ratios are head/base: p99 below 1 and achieved rate "
        "above 1 favour head.",
        "",
    ]
    for rate in args.rates:
        lines += rate_table(rate, [x for x in runs if x["target_rate"] == rate])
    times = {lb: [b["s"] * 1e3 for b in batches if b["label"] == lb] for lb in ("base", "head")}
    med = {lb: statistics.median(v) for lb, v in times.items()}
    lines.append(
        f"Batch of {args.batch} (POST /v1/batches, {len(times['base'])} per gateway): median base "
        f"{med['base']:.0f} ms, head {med['head']:.0f} ms, head/base {ratio(med['head'], med['base'])} "
        f"(base {', '.join(f'{t:.0f}' for t in times['base'])} ms; "
        f"head {', '.join(f'{t:.0f}' for t in times['head'])} ms)."
    )
    return "\n".join(lines) + "\n"


def run_compare(args: argparse.Namespace, stack: Stack, data: Path) -> str:
    """Base (a worktree of --compare) and head (this checkout) side by side on one Redis, alternated;
    writes gateway_compare.{md,json}."""
    root = repo_root()
    meta = {
        "base_rev": args.compare,
        "base_sha": git(root, "rev-parse", "--verify", f"{args.compare}^{{commit}}"),
        "head_sha": git(root, "rev-parse", "HEAD"),
        "head_dirty": bool(git(root, "--no-optional-locks", "status", "--porcelain")),
        "machine": machine(),
        "argv": sys.argv,
        "orig_argv": sys.orig_argv,
    }
    revs = {"base": meta["base_sha"], "head": meta["head_sha"] + ("+dirty" if meta["head_dirty"] else "")}
    with contextlib.ExitStack() as cleanup:
        tree = cleanup.enter_context(worktree(root, meta["base_sha"]))
        cleanup.callback(stack.stop)
        stack.start_redis()
        envs = checked_envs(gateway_env(stack, data), root, tree)
        urls, tasks = {}, {}
        for label, port, cwd in (("base", free_port(), tree), ("head", stack.port, None)):
            log_path = data / "logs" / f"gateway-{label}.log"
            gateway = start_gateway(envs[label], port, log_path, args.workers, cwd)
            cleanup.callback(stop_gateway, gateway)
            urls[label] = f"http://127.0.0.1:{port}"
            wait_live(urls[label], gateway, log_path)
            tasks[label] = create_task(urls[label])
        script = write_script(data)
        for label in ("base", "head"):
            run_wrk(urls[label], tasks[label], 50, 4, 3, script)  # warm-up
        runs, batches = alternate(args, urls, tasks, script, revs)
    text = compare_report(args, meta, runs, batches)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gateway_compare.md").write_text(text)
    (args.out / "gateway_compare.json").write_text(
        json.dumps({**meta, "runs": runs, "batches": batches}, indent=1)
    )
    return text


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rates", type=float, nargs="*", default=[100, 200, 400, 0])
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--batch-repeats", type=int, default=5)
    ap.add_argument("--workers", type=int, default=1, help="gateway processes (uvicorn --workers)")
    ap.add_argument("--compare", metavar="REV", help="also run REV's gateway (a git worktree), alternated")
    ap.add_argument("--rounds", type=int, default=3, help="with --compare: ABBA rounds")
    args = ap.parse_args()
    if shutil.which("wrk") is None:
        print("wrk is not installed: apt-get install wrk")
        return 2
    data = Path(tempfile.mkdtemp(prefix="evalsvc-gwbench-"))
    (data / "logs").mkdir()
    rport, gport = free_port(), free_port()
    stack = Stack(data_dir=data, redis_url=f"redis://127.0.0.1:{rport}/0", port=gport)
    text = run_compare(args, stack, data) if args.compare else run_single(args, stack, data)
    print(text)
    shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
