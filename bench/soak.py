"""Soak and load: thousands of submissions from concurrent clients while workers, the gateway and Redis
are killed and restarted at random; then every accepted id must have exactly one terminal result.

    python3 -m bench.soak --submissions 2000 --clients 16 --out /tmp/soak   # long form, docs/reliability.md

Loopback only: it starts its own stack (bench.live_stack) unless given one (the CI test's short form).
Submissions are cheap so that thousands fit: most are distinct solutions refused by the static checks
at the compile stage (the full gateway -> Redis -> compile worker -> result path, no build), some are
distinct honest evaluations of a tiny task on a CPU-device worker (a cached build, the whole pipeline),
some repeat earlier content (dedup) and every one carries an Idempotency-Key that clients reuse when
they retry after a connection error or a 503.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import statistics
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from queue import Empty, Queue
from typing import Any

import httpx

from bench.live_stack import LiveStack

REFUSED = """\
import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)  # variant {n}
"""
FAST = {"trials": 2, "compile_baseline": False, "timing_pool": 2}
FAULTS = ("kill -9 device worker", "kill -9 gateway", "kill -9 compile worker", "restart redis")


@dataclass
class Submission:
    n: int
    body: dict[str, Any]
    key: str
    expect_ok: bool


@dataclass
class Outcome:
    accepted: dict[int, str] = field(default_factory=dict)  # submission number -> job id
    refused: Counter[str] = field(default_factory=Counter)  # final 4xx by code (none expected)
    http_5xx: Counter[str] = field(default_factory=Counter)  # 5xx answers by code (retried)
    connection_errors: int = 0
    post_latency_s: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    first_accepted: threading.Event = field(default_factory=threading.Event)


@dataclass
class Report:
    submissions: int
    clients: int
    accepted: int
    not_accepted: int
    distinct_jobs: int
    by_status: dict[str, int]
    internal_errors: dict[str, int]
    lost: int
    duplicated: int
    unexpected_merges: int
    wrong_verdicts: int
    http_5xx: dict[str, int]
    http_500: int
    refused_4xx: dict[str, int]
    connection_errors: int
    faults: dict[str, int]
    submit_wall_s: float
    drain_wall_s: float
    throughput_accepted_per_s: float
    throughput_results_per_s: float
    post_latency_ms: dict[str, float]
    end_to_end_s: dict[str, float]
    ok: bool


def plan(
    task_id: str, honest: dict[str, Any], total: int, honest_every: int, dup_every: int
) -> list[Submission]:
    """Distinct refused solutions, every `honest_every`-th a distinct honest evaluation, every
    `dup_every`-th a repeat of an earlier refused one (same content: served by dedup)."""
    out: list[Submission] = []
    for n in range(total):
        if honest_every and n % honest_every == 0:
            opts = {**FAST, "timing_budget_s": round(0.05 + n * 1e-6, 6)}
            body = {"task_id": task_id, "solution": honest, "options": opts}
            out.append(Submission(n, body, f"soak-{n}", True))
            continue
        variant = n - 1 if dup_every and n % dup_every == 0 else n
        solution = {"files": {"solution.py": REFUSED.format(n=variant)}}
        body = {"task_id": task_id, "solution": solution, "options": FAST}
        out.append(Submission(n, body, f"soak-{n}", False))
    return out


def client_loop(url: str, work: Queue[Submission], outcome: Outcome, deadline: float) -> None:
    """POST each submission until accepted; retry connection errors and 5xx with the same key."""
    with httpx.Client(base_url=url, timeout=30) as http:
        while True:
            try:
                sub = work.get_nowait()
            except Empty:
                return
            delay = 0.1
            while time.monotonic() < deadline:
                started = time.monotonic()
                try:
                    r = http.post("/v1/evaluations", json=sub.body, headers={"Idempotency-Key": sub.key})
                except httpx.HTTPError:
                    with outcome.lock:
                        outcome.connection_errors += 1
                    time.sleep(delay)
                    delay = min(delay * 2, 2.0)
                    continue
                elapsed = time.monotonic() - started
                if r.status_code >= 500:
                    with outcome.lock:
                        outcome.http_5xx[f"{r.status_code} {_code(r)}"] += 1
                    time.sleep(float(r.headers.get("Retry-After", delay)) if r.status_code == 503 else delay)
                    delay = min(delay * 2, 2.0)
                    continue
                with outcome.lock:
                    outcome.post_latency_s.append(elapsed)
                    if r.status_code in (200, 202):
                        outcome.accepted[sub.n] = r.json()["id"]
                        outcome.first_accepted.set()
                    else:
                        outcome.refused[f"{r.status_code} {_code(r)}"] += 1
                break


def _code(r: httpx.Response) -> str:
    try:
        return str(r.json().get("code"))
    except ValueError:
        return "-"


class FaultInjector(threading.Thread):
    """Every `every_s` (jittered), one fault from `kinds`, the process started again at once."""

    def __init__(
        self,
        stack: LiveStack,
        kinds: tuple[str, ...],
        every_s: float,
        seed: int,
        window_s: float | None,
        first_after: threading.Event,
    ) -> None:
        super().__init__(daemon=True)
        self.stack, self.kinds, self.every_s = stack, kinds, every_s
        self.until = None if window_s is None else time.monotonic() + window_s
        self.rng = random.Random(seed)
        self.done = threading.Event()
        self.first_after = first_after
        self.injected: Counter[str] = Counter()

    def run(self) -> None:
        # The first fault as soon as work is in flight: on an idle machine the whole short run drained before
        # the timer's first tick and no fault was injected (full suite on this CPU, 2026-12-06).
        while not self.first_after.wait(0.05):
            if self.done.is_set():
                return
        self._inject()
        while not self.done.wait(self.every_s * self.rng.uniform(0.5, 1.5)):
            if self.until is not None and time.monotonic() > self.until:
                return
            self._inject()

    def _inject(self) -> None:
        devices = [n for n in self.stack.procs if n.startswith("cpu-")]
        kind = self.rng.choice(self.kinds)
        if kind == "kill -9 device worker":
            self.stack.restart(self.rng.choice(devices), signal.SIGKILL)
        elif kind == "kill -9 gateway":
            self.stack.restart("gateway", signal.SIGKILL)
        elif kind == "kill -9 compile worker":
            self.stack.restart("compile", signal.SIGKILL)
        elif kind == "restart redis":
            self.stack.kill("redis", signal.SIGTERM)
            time.sleep(1.0)
            self.stack.start("redis")
        self.injected[kind] += 1


def fetch_views(url: str, ids: list[str]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    with httpx.Client(base_url=url, timeout=30) as http:
        for job_id in ids:
            try:
                r = http.get(f"/v1/evaluations/{job_id}")
            except httpx.HTTPError:
                continue
            if r.status_code == 200:
                out[job_id] = r.json()
    return out


def drain(url: str, ids: set[str], deadline: float) -> dict[str, dict]:
    """Poll until every job in `ids` is done or the deadline passes; the done views."""
    done: dict[str, dict] = {}
    while time.monotonic() < deadline and len(done) < len(ids):
        views = fetch_views(url, sorted(ids - set(done)))
        done.update({i: v for i, v in views.items() if v["state"] == "done"})
        if len(done) < len(ids):
            time.sleep(1.0)
    return done


def percentiles(values: list[float], scale: float = 1.0) -> dict[str, float]:
    if not values:
        return {}
    qs = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else [values[0]] * 99
    return {
        "p50": round(qs[49] * scale, 3),
        "p90": round(qs[89] * scale, 3),
        "p99": round(qs[98] * scale, 3),
        "max": round(max(values) * scale, 3),
    }


def run(
    stack: LiveStack,
    *,
    submissions: int,
    clients: int,
    fault_kinds: tuple[str, ...],
    fault_every_s: float,
    fault_window_s: float | None = None,
    honest_every: int = 50,
    dup_every: int = 10,
    submit_limit_s: float = 600,
    drain_limit_s: float = 900,
    recheck_after_s: float = 0,
    seed: int = 0,
) -> Report:
    """The soak against a running stack; the report says whether every accepted id ended exactly once.
    Faults are injected from the first submission until the work has drained (or `fault_window_s`)."""
    from evalsvc.suite import cases

    ok_case = next(c for c in cases("cpu") if c.task_id == "l1/relu" and c.expect == "ok")
    task = ok_case.task()
    small = task.model_copy(update={"source": task.source.replace("ROWS = 5120", "ROWS = 64")})
    r = httpx.post(stack.url + "/v1/tasks", json=small.model_dump(mode="json"), timeout=30)
    r.raise_for_status()
    honest = ok_case.solution().model_dump(mode="json")
    subs = plan(r.json()["id"], honest, submissions, honest_every, dup_every)
    work: Queue[Submission] = Queue()
    for s in subs:
        work.put(s)
    outcome = Outcome()
    injector = FaultInjector(stack, fault_kinds, fault_every_s, seed, fault_window_s, outcome.first_accepted)
    started = time.monotonic()
    if fault_kinds:
        injector.start()
    threads = [
        threading.Thread(target=client_loop, args=(stack.url, work, outcome, started + submit_limit_s))
        for _ in range(clients)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    submit_wall = time.monotonic() - started
    drain_started = time.monotonic()
    ids = set(outcome.accepted.values())
    done = drain(stack.url, ids, drain_started + drain_limit_s)  # faults go on while the work drains
    injector.done.set()
    if fault_kinds:
        injector.join()
    for name in stack.procs:  # whatever the last fault left down comes back for the final count
        if not stack.alive(name):
            stack.start(name)
    done.update(drain(stack.url, ids - set(done), time.monotonic() + 300))
    drain_wall = time.monotonic() - drain_started
    duplicated = 0
    if recheck_after_s:
        time.sleep(recheck_after_s)  # past a redelivery: a second finish would have changed the document
        again = fetch_views(stack.url, sorted(done))
        duplicated = sum(1 for i, v in again.items() if v["updated_at"] != done[i]["updated_at"])
    return _report(subs, outcome, done, injector, clients, submit_wall, drain_wall, duplicated)


def _report(
    subs: list[Submission],
    outcome: Outcome,
    done: dict[str, dict],
    injector: FaultInjector,
    clients: int,
    submit_wall: float,
    drain_wall: float,
    duplicated: int,
) -> Report:
    accepted = outcome.accepted
    ids = set(accepted.values())
    by_status = Counter(str(v["status"]) for v in done.values())
    # Only content repeats may share a job; a distinct submission merged into another is a lost one.
    expected_jobs = len({json.dumps(s.body, sort_keys=True) for s in subs if s.n in accepted})
    wrong = sum(
        1
        for s in subs
        if s.n in accepted
        and accepted[s.n] in done
        and (done[accepted[s.n]]["status"] == "ok") != s.expect_ok
    )
    e2e = [v["updated_at"] - v["created_at"] for v in done.values()]
    http_500 = sum(n for k, n in outcome.http_5xx.items() if not k.startswith("503"))
    lost = len(ids) - len(done)
    merges = expected_jobs - len(ids)
    return Report(
        submissions=len(subs),
        clients=clients,
        accepted=len(accepted),
        not_accepted=len(subs) - len(accepted),
        distinct_jobs=len(ids),
        by_status=dict(by_status),
        internal_errors=dict(
            Counter(
                str(v["result"].get("failure") or (v["result"].get("message") or "")[:80])
                for v in done.values()
                if v["status"] == "internal_error"
            )
        ),
        lost=lost,
        duplicated=duplicated,
        unexpected_merges=merges,
        wrong_verdicts=wrong,
        http_5xx=dict(outcome.http_5xx),
        http_500=http_500,
        refused_4xx=dict(outcome.refused),
        connection_errors=outcome.connection_errors,
        faults=dict(injector.injected),
        submit_wall_s=round(submit_wall, 2),
        drain_wall_s=round(drain_wall, 2),
        throughput_accepted_per_s=round(len(accepted) / submit_wall, 2) if submit_wall else 0.0,
        throughput_results_per_s=round(len(done) / (submit_wall + drain_wall), 2),
        post_latency_ms=percentiles(outcome.post_latency_s, 1e3),
        end_to_end_s=percentiles(e2e),
        ok=lost == 0
        and duplicated == 0
        and merges == 0
        and wrong == 0
        and http_500 == 0
        and len(accepted) == len(subs)
        and sum(by_status.values()) == len(ids),
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--submissions", type=int, default=2000)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--device-workers", type=int, default=2)
    p.add_argument("--fault-every", type=float, default=20.0, help="seconds between faults (jittered)")
    p.add_argument("--faults", default=",".join(FAULTS), help=f"comma-separated subset of {FAULTS}")
    p.add_argument("--honest-every", type=int, default=50)
    p.add_argument("--data-dir", type=Path, default=Path("/var/tmp/evalsvc-test"))
    p.add_argument("--out", type=Path, default=None, help="directory for soak.json")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    kinds = tuple(k for k in args.faults.split(",") if k)
    unknown = set(kinds) - set(FAULTS)
    if unknown:
        p.error(f"unknown faults {sorted(unknown)}")
    root = Path(tempfile.mkdtemp(prefix="evalsvc-soak-"))
    stack = LiveStack(
        root,
        args.data_dir,
        cpu_workers=tuple(f"cpu-{i}" for i in range(args.device_workers)),
        env={"EVALSVC_REDELIVERY_AFTER_S": "60", "EVALSVC_RATE_LIMIT_PER_S": "0"},
    )
    try:
        stack.start_all()
        report = run(
            stack,
            submissions=args.submissions,
            clients=args.clients,
            fault_kinds=kinds,
            fault_every_s=args.fault_every,
            honest_every=args.honest_every,
            recheck_after_s=70,
            seed=args.seed,
        )
    finally:
        stack.stop()
    text = json.dumps(asdict(report), indent=2)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "soak.json").write_text(text + "\n")
    shutil.rmtree(root, ignore_errors=True)
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
