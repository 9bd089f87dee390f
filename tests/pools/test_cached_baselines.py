"""An evaluation of a vetted task starts from the baselines vetting stored in the fleet's Redis cache:
its timings say so, and they are the vetted numbers exactly. Real Docker compile, real runner, CPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from evalsvc.cli_files import read_solution, read_task
from evalsvc.core.options import EvalOptions
from evalsvc.core.pools import VetPolicy
from evalsvc.core.results import Status
from evalsvc.engine.evaluate import LocalPipeline
from evalsvc.pools.vet import Vetter
from evalsvc.settings import Settings
from evalsvc.store.baselines import RedisBaselineCache
from evalsvc.wiring import make_evaluator, make_store
from tests.pools.conftest import running_redis

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
TASK = ROOT / "tests" / "corpus" / "tasks" / "l1" / "relu" / "task.py"
SOLUTION = ROOT / "evalsvc" / "examples" / "l1" / "relu" / "cpu_ok.py"
BUDGET = 0.3


def test_evaluation_of_a_vetted_task_reads_its_baselines_from_the_cache(
    pipeline: LocalPipeline, cpu_settings: Settings, tmp_path: Path
) -> None:
    spec = read_task(TASK)
    with running_redis(tmp_path) as url:
        cache = RedisBaselineCache(redis.Redis.from_url(url))
        record = Vetter("cpu", "cpu", cache).vet(
            spec, VetPolicy(min_eager_ms=0.0, max_eager_ms=10_000, timing_budget_s=BUDGET)
        )
        assert record.eager_ms is not None and record.compiled_ms is not None, record.findings

        evaluator = make_evaluator(cpu_settings, make_store(cpu_settings), cache)  # as a GPU worker wires it
        engine = LocalPipeline(pipeline.compiler, evaluator)
        opts = EvalOptions(trials=2, timing_budget_s=BUDGET, timing_pool=2)
        result = engine.evaluate(spec, read_solution(SOLUTION), opts)
        assert result.status is Status.OK, result.message
        t = result.timings
        # The vetted figures were read; a re-check under a busy machine may replace one, and says so.
        checks = {c.kind: c for c in t.baseline_checks}
        for kind, used, vetted, cached in (
            ("eager", t.eager, record.eager_ms, t.eager_cached),
            ("compiled", t.compiled, record.compiled_ms, t.compiled_cached),
        ):
            assert used is not None, kind
            if kind in checks and checks[kind].replaced:
                assert checks[kind].cached_ms == vetted and not cached, (kind, checks[kind])
            else:
                assert cached and used.median_ms == vetted, (kind, used, vetted)

        # another timing policy is another cache key: measured now, and said so
        other = engine.evaluate(
            spec, read_solution(SOLUTION), opts.model_copy(update={"timing_budget_s": 0.25})
        )
        assert other.status is Status.OK, other.message
        assert not other.timings.eager_cached and not other.timings.baseline_cached
        assert other.timings.baselines_measured_s is not None and other.timings.baselines_measured_s > 0
