"""bench/capacity_sim.py: invariants of the model that hold whatever the measured costs are, on small cases
(short builds, small batches) so that the file runs in seconds; and bench/capacity_load.py for two
seconds against a real Redis and gateway, checking that it reports every field (nothing on speed)."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.capacity_sim import Costs, Scenario, bounds, cores_needed, is_hit, simulate, unlimited_cores

ROOT = Path(__file__).resolve().parents[2]
SMALL = Costs(build_cpu_s=4.0, max_batch=64)


def ample(gpus: int, rollouts: int, hit_rate: float) -> Scenario:
    sc = Scenario(gpus, rollouts, hit_rate, 1)
    return dataclasses.replace(sc, compile_cores=unlimited_cores(sc, SMALL))


@pytest.mark.parametrize("rollouts", [1, 63, 64, 65, 200])
@pytest.mark.parametrize("hit_rate", [0.0, 0.3, 1.0])
def test_every_rollout_gets_exactly_one_reward(rollouts: int, hit_rate: float) -> None:
    for cores in (1, 3, 64):
        res = simulate(Scenario(2, rollouts, hit_rate, cores), SMALL)
        assert res.rewards == [1] * rollouts


def test_the_step_never_beats_a_lower_bound() -> None:
    for sc in (Scenario(1, 100, 0.0, 2), Scenario(4, 100, 0.5, 50), Scenario(16, 40, 1.0, 1)):
        res = simulate(sc, SMALL)
        assert res.bounds_s == bounds(sc, SMALL, res.busy_s)
        for name, bound in res.bounds_s.items():
            assert res.time_to_rewards_s >= bound - 1e-9, (sc, name, bound, res.time_to_rewards_s)


def test_more_gpus_never_slow_a_step_with_ample_compile_cores() -> None:
    for hit_rate in (0.0, 0.5):
        times = [simulate(ample(g, 256, hit_rate), SMALL).time_to_rewards_s for g in (1, 2, 4, 8, 32)]
        assert times == sorted(times, reverse=True), times


def test_more_compile_cores_never_slow_a_step() -> None:
    times = [simulate(Scenario(4, 128, 0.0, c), SMALL).time_to_rewards_s for c in (1, 2, 8, 32, 256)]
    assert times == sorted(times, reverse=True), times


def test_cold_builds_on_few_cores_make_compile_the_bottleneck() -> None:
    assert simulate(Scenario(8, 128, 0.0, 2), SMALL).bottleneck == "compile"


def test_all_cache_hits_on_one_gpu_make_the_gpu_the_bottleneck() -> None:
    assert simulate(Scenario(1, 128, 1.0, 4), SMALL).bottleneck == "gpu"


def test_one_cold_rollout_on_a_large_fleet_is_bound_by_its_latency() -> None:
    assert simulate(ample(64, 4, 0.0), SMALL).bottleneck == "latency"


def test_cores_needed_is_the_fewest_that_keep_the_step_within_five_percent() -> None:
    sc = Scenario(4, 96, 0.25, 1)
    needed, fed = cores_needed(sc, SMALL)
    best = simulate(dataclasses.replace(sc, compile_cores=unlimited_cores(sc, SMALL)), SMALL)
    assert fed.scenario.compile_cores == needed
    assert fed.time_to_rewards_s <= best.time_to_rewards_s * 1.05
    if needed > 1:
        fewer = simulate(dataclasses.replace(sc, compile_cores=needed - 1), SMALL)
        assert fewer.time_to_rewards_s > best.time_to_rewards_s * 1.05


def test_hits_are_the_asked_share_of_the_items() -> None:
    for n, h in ((100, 0.0), (100, 0.37), (7, 0.5), (64, 1.0)):
        assert sum(is_hit(i, h) for i in range(n)) == math.floor(n * h)


def test_a_scenario_out_of_range_is_refused() -> None:
    for sc in (Scenario(0, 1, 0.0, 1), Scenario(1, 0, 0.0, 1), Scenario(1, 1, 1.5, 1), Scenario(1, 1, 0, 0)):
        with pytest.raises(ValueError):
            simulate(sc, SMALL)


@pytest.mark.redis
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
def test_the_load_test_reports_every_field_without_errors(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "bench.capacity_load", "--out", str(tmp_path), "--seconds", "2"]
    cmd += ["--rate", "20", "--batch-size", "4", "--pollers", "2", "--poll-batch", "4", "--poll-wait", "1"]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    doc = json.loads((tmp_path / "capacity_load.json").read_text())
    assert [p["phase"] for p in doc["phases"]] == ["submit", "poll", "mixed"]
    for p in doc["phases"]:
        assert p["errors"] == 0, p
        for key in (
            "redis_cpu_fraction",
            "redis_commands_per_s",
            "gateway_cpu_fraction",
            "client_cpu_fraction",
        ):
            assert p[key] >= 0, (key, p)
    submit, poll, mixed = doc["phases"]
    assert submit["items_submitted"] > 0 and submit["endpoints"]["POST /v1/batches"]["requests"] > 0
    assert poll["items_submitted"] == 0 and poll["redis_hmget_per_s"] > 0
    assert set(mixed["endpoints"]) == {"POST /v1/batches", "GET /v1/batches/{id}?wait=1 (less the wait)"}
    assert (tmp_path / "capacity_load.md").is_file()
