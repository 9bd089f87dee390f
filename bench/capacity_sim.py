"""Capacity model: a discrete-event simulation (simpy) of one RL step through the service.

    python -m bench.capacity_sim --out docs/results/cpu-2026-12-08-capacity

One step: the trainer submits its rollouts as batches of at most `max_batch` (as `evalsvc.rl.judge` does),
then long-polls each batch in turn; the gateway reads every item of the batch from Redis on each tick
(`evalsvc.api.polling`: 0.05 s growing to 0.25 s). Each item is compiled (a cache hit, or a cold build that
holds `build_parallel` cores for `build_cpu_s / build_parallel` seconds) and then evaluated on one GPU: a
serial runner start (`1 / gpu_rate_per_s`, what bounds a GPU worker today) and the rest of the evaluation
(`gpu_latency_s`), at most `gpu_in_flight` per GPU. The gateway processes and Redis are servers whose
service times are the CPU each piece of work costs them. Every default is a measured figure; where each
was measured is in docs/capacity.md.

For each fleet size and step size it reports the time to all rewards, the first bottleneck (the largest of
the lower bounds each resource puts on the step: its work over its capacity, or one evaluation's latency
when no resource is saturated) and the compile cores at which the step ends within 5% of its time with
unlimited cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import simpy

GPUS = (8, 32, 128)
ROLLOUTS = (512, 4096)
HIT_RATES = (0.0, 0.5)
CORES_PER_GPU = 16  # the lent GPU machines: 16 CPU cores per GPU (1 x H200/H100 with 16, 8 with 128)
NOT_STARVED = 1.05  # "enough compile cores": within 5% of the step's time with unlimited cores


@dataclass(frozen=True)
class Costs:
    """Per-stage costs; each default is a measured figure (docs/capacity.md says where and how)."""

    build_cpu_s: float = 69.0  # c: CPU-s per cold CUDA build, light headers, H200 host (upper of 35-69)
    build_parallel: int = 2  # processes per build (16 in flight for 8 builds on the H200 host)
    cache_hit_s: float = 0.025  # a compile-cache hit, one core (23-28 ms, this CPU)
    gpu_rate_per_s: float = 3.2  # runner starts per second per GPU at 8 in flight (H200, runs 12-15)
    gpu_latency_s: float = 0.17  # the rest of one evaluation: 0.48 s one at a time minus 1 / 3.2
    gpu_in_flight: int = 8
    gateway_procs: int = 1
    gateway_item_s: float = 3.5e-4  # gateway CPU per batch item accepted (this CPU, bench.capacity_load)
    gateway_tick_item_s: float = 1.44e-4  # gateway CPU per item read on a batch poll's tick (same)
    redis_submit_s: float = 7.4e-5  # Redis CPU per item submitted in a batch (same)
    redis_tick_item_s: float = 5.0e-6  # Redis CPU per item read on a poll tick (same)
    redis_worker_s: float = 1.79e-3  # Redis CPU per evaluation on the workers: <= 100 commands x 17.9 us
    max_batch: int = 1024  # settings.max_batch, and the judge's chunk
    poll_first_s: float = 0.05  # evalsvc.api.polling.PollPolicy
    poll_max_s: float = 0.25
    poll_growth: float = 1.2


@dataclass(frozen=True)
class Scenario:
    gpus: int
    rollouts: int
    hit_rate: float
    compile_cores: int


@dataclass
class Result:
    scenario: Scenario
    time_to_rewards_s: float
    rewards: list[int]  # rewards delivered per rollout: exactly one each
    busy_s: dict[str, float]  # unit-seconds each resource was held
    bounds_s: dict[str, float] = field(default_factory=dict)
    bottleneck: str = ""

    def utilization(self) -> dict[str, float]:
        return {k: v / self.time_to_rewards_s for k, v in self.bounds_s.items() if k != "latency"}


def is_hit(i: int, hit_rate: float) -> bool:
    """floor(n * hit_rate) hits among the first n items, spread evenly: no randomness."""
    return math.floor((i + 1) * hit_rate) > math.floor(i * hit_rate)


class Fleet:
    """The resources of one simulated run and the processes that use them."""

    def __init__(self, env: simpy.Environment, costs: Costs, sc: Scenario) -> None:
        self.env, self.costs, self.sc = env, costs, sc
        self.gateway = simpy.Resource(env, capacity=costs.gateway_procs)
        self.redis = simpy.Resource(env, capacity=1)  # one single-threaded primary
        self.cores = simpy.Container(env, capacity=sc.compile_cores, init=sc.compile_cores)
        self.gpu_start = [simpy.Resource(env, capacity=1) for _ in range(sc.gpus)]
        self.device_queue: simpy.Store = simpy.Store(env)
        self.done = [False] * sc.rollouts
        self.busy = {"gateway": 0.0, "redis": 0.0, "compile": 0.0, "gpu": 0.0}
        for g in range(sc.gpus):
            for _ in range(costs.gpu_in_flight):
                env.process(self.gpu_slot(g))

    def hold(self, name: str, res: simpy.Resource, seconds: float) -> Generator[Any, Any, None]:
        with res.request() as req:
            yield req
            yield self.env.timeout(seconds)
        self.busy[name] += seconds

    def compile_job(self, i: int) -> Generator[Any, Any, None]:
        c = self.costs
        if is_hit(i, self.sc.hit_rate):
            units, seconds = 1, c.cache_hit_s
        else:
            units = min(c.build_parallel, self.sc.compile_cores)
            seconds = c.build_cpu_s / units
        yield self.cores.get(units)
        yield self.env.timeout(seconds)
        yield self.cores.put(units)
        self.busy["compile"] += units * seconds
        yield from self.hold("redis", self.redis, c.redis_worker_s / 2)
        yield self.device_queue.put(i)

    def gpu_slot(self, g: int) -> Generator[Any, Any, None]:
        """One of a GPU worker's evaluations in flight: the serial runner start, then the rest."""
        c = self.costs
        while True:
            i = yield self.device_queue.get()
            yield from self.hold("gpu", self.gpu_start[g], 1 / c.gpu_rate_per_s)
            yield self.env.timeout(c.gpu_latency_s)
            yield from self.hold("redis", self.redis, c.redis_worker_s / 2)
            self.done[i] = True

    def trainer(self, rewards: list[int]) -> Generator[Any, Any, None]:
        """Submit every batch, then long-poll each in turn (evalsvc.rl.judge.Judge.score)."""
        c, n = self.costs, self.sc.rollouts
        batches = [range(k, min(k + c.max_batch, n)) for k in range(0, n, c.max_batch)]
        for items in batches:
            yield from self.hold("gateway", self.gateway, len(items) * c.gateway_item_s)
            yield from self.hold("redis", self.redis, len(items) * c.redis_submit_s)
            for i in items:
                self.env.process(self.compile_job(i))
        for items in batches:
            delay = c.poll_first_s
            while True:
                yield from self.hold("redis", self.redis, len(items) * c.redis_tick_item_s)
                yield from self.hold("gateway", self.gateway, len(items) * c.gateway_tick_item_s)
                if all(self.done[i] for i in items):
                    break
                yield self.env.timeout(delay)
                delay = min(delay * c.poll_growth, c.poll_max_s)
            for i in items:
                rewards[i] += 1


def simulate(sc: Scenario, costs: Costs = Costs()) -> Result:
    if sc.gpus < 1 or sc.rollouts < 1 or sc.compile_cores < 1 or not 0 <= sc.hit_rate <= 1:
        raise ValueError(f"not a scenario: {sc}")
    env = simpy.Environment()
    fleet = Fleet(env, costs, sc)
    rewards = [0] * sc.rollouts
    env.run(until=env.process(fleet.trainer(rewards)))
    res = Result(sc, env.now, rewards, fleet.busy)
    res.bounds_s = bounds(sc, costs, fleet.busy)
    res.bottleneck = max(res.bounds_s, key=lambda k: res.bounds_s[k])
    return res


def bounds(sc: Scenario, costs: Costs, busy: dict[str, float]) -> dict[str, float]:
    """Lower bounds on the step's time, one per resource (its work over its capacity) and one evaluation's
    latency (a cold build's wall time, a runner start and the rest): the largest is the bottleneck."""
    cold = any(not is_hit(i, sc.hit_rate) for i in range(sc.rollouts))
    build_wall = (
        costs.build_cpu_s / min(costs.build_parallel, sc.compile_cores) if cold else costs.cache_hit_s
    )
    return {
        "gateway": busy["gateway"] / costs.gateway_procs,
        "redis": busy["redis"],
        "compile": busy["compile"] / sc.compile_cores,
        "gpu": busy["gpu"] / sc.gpus,
        "latency": build_wall + 1 / costs.gpu_rate_per_s + costs.gpu_latency_s,
    }


def unlimited_cores(sc: Scenario, costs: Costs) -> int:
    """Enough cores that every build of the step runs at once."""
    return max(1, sc.rollouts * costs.build_parallel)


def cores_needed(sc: Scenario, costs: Costs = Costs()) -> tuple[int, Result]:
    """The fewest compile cores whose step ends within NOT_STARVED of its time with unlimited cores (a
    bisection: more cores never slow the step), and that run."""
    best = simulate(dataclasses.replace(sc, compile_cores=unlimited_cores(sc, costs)), costs)
    goal = best.time_to_rewards_s * NOT_STARVED
    lo, hi, at_hi = 1, best.scenario.compile_cores, best
    while lo < hi:
        mid = (lo + hi) // 2
        run = simulate(dataclasses.replace(sc, compile_cores=mid), costs)
        if run.time_to_rewards_s <= goal:
            hi, at_hi = mid, run
        else:
            lo = mid + 1
    return hi, at_hi


def steady_state(gpus: int, hit_rate: float, costs: Costs) -> dict[str, float]:
    """Evaluations per second each stage sustains when the GPUs are fed, and the cores that takes."""
    per_eval_core_s = (1 - hit_rate) * costs.build_cpu_s + hit_rate * costs.cache_hit_s
    evals_per_s = gpus * costs.gpu_rate_per_s
    n = costs.max_batch
    tick_s = costs.poll_max_s + n * (costs.gateway_tick_item_s + costs.redis_tick_item_s)  # sleep, then read
    return {
        "evaluations_per_s": evals_per_s,
        "compile_cores": evals_per_s * per_eval_core_s,
        "gateway_cpu_for_submissions": evals_per_s * costs.gateway_item_s,
        "gateway_cpu_for_one_batch_poll": n * costs.gateway_tick_item_s / tick_s,
        "redis_cpu_for_evaluations": evals_per_s * (costs.redis_submit_s + costs.redis_worker_s),
        "redis_cpu_for_one_batch_poll": n * costs.redis_tick_item_s / tick_s,
    }


def scenarios(
    gpus: tuple[int, ...], rollouts: tuple[int, ...], hit_rates: tuple[float, ...]
) -> Iterator[Scenario]:
    for g in gpus:
        for n in rollouts:
            for h in hit_rates:
                yield Scenario(g, n, h, g * CORES_PER_GPU)


def row(sc: Scenario, costs: Costs) -> dict[str, Any]:
    fixed = simulate(sc, costs)
    needed, fed = cores_needed(sc, costs)
    return {
        "gpus": sc.gpus,
        "rollouts": sc.rollouts,
        "hit_rate": sc.hit_rate,
        "compile_cores": sc.compile_cores,
        "time_to_rewards_s": round(fixed.time_to_rewards_s, 2),
        "bottleneck": fixed.bottleneck,
        "bounds_s": {k: round(v, 3) for k, v in fixed.bounds_s.items()},
        "utilization": {k: round(v, 4) for k, v in fixed.utilization().items()},
        "cores_needed": needed,
        "time_with_cores_needed_s": round(fed.time_to_rewards_s, 2),
        "bottleneck_with_cores_needed": fed.bottleneck,
        "steady_state": {k: round(v, 4) for k, v in steady_state(sc.gpus, sc.hit_rate, costs).items()},
    }


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        f"| GPUs | rollouts | hit rate | time to rewards, {CORES_PER_GPU} cores/GPU | first bottleneck "
        "| compile cores needed | time with them | bottleneck with them | cores/GPU, steady state |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        per_gpu = r["steady_state"]["compile_cores"] / r["gpus"]
        lines.append(
            f"| {r['gpus']} | {r['rollouts']} | {r['hit_rate']:g} | {r['time_to_rewards_s']:.1f} s "
            f"({r['compile_cores']} cores) | {r['bottleneck']} | {r['cores_needed']} | "
            f"{r['time_with_cores_needed_s']:.1f} s | {r['bottleneck_with_cores_needed']} | {per_gpu:.0f} |"
        )
    return "\n".join(lines) + "\n"


def load_test_rates(costs: Costs, gpus: int = 128, rollouts: int = 4096) -> dict[str, float]:
    """What the gateway and Redis see at `gpus` with the GPUs fed: submissions per second, and the one
    long-poll a trainer holds (one batch of `max_batch` items read per tick)."""
    return {
        "gpus": gpus,
        "submissions_per_s": gpus * costs.gpu_rate_per_s,
        "batch_size": min(rollouts, costs.max_batch),
        "batch_polls_in_flight": 1,
        "tick_s": costs.poll_max_s,
        "item_reads_per_s": min(rollouts, costs.max_batch) / costs.poll_max_s,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="write capacity.json and capacity.md here")
    ap.add_argument("--gpus", type=int, nargs="*", default=list(GPUS))
    ap.add_argument("--rollouts", type=int, nargs="*", default=list(ROLLOUTS))
    ap.add_argument("--hit-rates", type=float, nargs="*", default=list(HIT_RATES))
    for f in dataclasses.fields(Costs):
        ap.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    args = ap.parse_args()
    costs = Costs(**{f.name: getattr(args, f.name) for f in dataclasses.fields(Costs)})
    rows = [row(sc, costs) for sc in scenarios(tuple(args.gpus), tuple(args.rollouts), tuple(args.hit_rates))]
    text = table(rows)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        command = " ".join(["python", "-m", "bench.capacity_sim", *sys.argv[1:]])
        doc = {
            "command": command,
            "costs": dataclasses.asdict(costs),
            "cores_per_gpu": CORES_PER_GPU,
            "rows": rows,
            "load_test": load_test_rates(costs),
        }
        (args.out / "capacity.json").write_text(json.dumps(doc, indent=1) + "\n")
        (args.out / "capacity.md").write_text(f"# Capacity model\n\n`{command}`\n\n{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
