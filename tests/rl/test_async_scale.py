"""1,024 submissions through `AsyncClient` under the gateway's default rate limits (50 requests/s per key,
bursts of 200): as one batch, and as 1,024 concurrent single submissions, most of which the gateway
answers 429 at first; the client's retries (tenacity, honouring Retry-After) carry every one through with
no error. The same honest solution throughout, so the evaluations behind them are one job and its
duplicates: what is exercised is the gateway, the queue path and the client, not CPU arithmetic."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from evalsvc.core.options import EvalOptions
from evalsvc.core.results import Status
from evalsvc.core.solutions import Solution
from evalsvc.core.tasks import TaskSpec
from evalsvc.records.documents import EvaluationRequest, State
from evalsvc.sdk import AsyncClient
from tests.live_stack import LiveStack

pytestmark = pytest.mark.docker

EXAMPLES = Path(__file__).parents[2] / "evalsvc" / "examples" / "l1" / "relu"
OK = (EXAMPLES / "cpu_ok.py").read_text()
TASK = (EXAMPLES / "task.py").read_text().replace("ROWS = 5120", "ROWS = 48")
N = 1024
OPTS = EvalOptions(trials=2, timing_budget_s=0.2, compile_baseline=False, timing_pool=2)


def test_1024_evaluations_through_the_async_client_under_the_rate_limits(stack: LiveStack) -> None:
    async def run() -> None:
        async with AsyncClient(stack.url, timeout=60) as client:
            task_id = await client.register_task(TaskSpec(source=TASK))
            solution = Solution.single_file(OK)
            requests = [EvaluationRequest(task_id=task_id, solution=solution, options=OPTS) for _ in range(N)]
            batch_id = await client.submit_batch(requests)
            batch = await client.wait_batch(batch_id, timeout=900)
            assert batch.total == N and batch.done == N, batch
            rewards = {item.reward for item in batch.items}
            assert len(batch.items) == N and rewards == {1.0}, rewards

            views = await asyncio.gather(*(client.submit(task_id, OK, OPTS) for _ in range(N)))
            assert len({v.id for v in views}) >= 1 and all(v.id for v in views)
            done = await asyncio.gather(*(client.wait(v.id, timeout=900) for v in views))
            assert all(v.state is State.DONE for v in done)
            statuses = {v.result.status for v in done if v.result is not None}
            assert statuses == {Status.OK} and len([v for v in done if v.result]) == N

    asyncio.run(run())
