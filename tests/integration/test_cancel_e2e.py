"""Cancel and push on the real stack: redis-server, the uvicorn gateway, a Celery compile worker (Docker
sandbox) and a CPU-device worker, each its own process. Work is held queued by stopping the compile
worker (as tests/rl stops its device worker); nothing here asserts on a duration."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from evalsvc.core.options import EvalOptions
from evalsvc.core.results import Status
from evalsvc.records.documents import EvaluationRequest, State
from evalsvc.sdk import ApiError, Client
from evalsvc.suite import cases
from tests.corpus.reader import small_task
from tests.live_stack import CLI, LiveStack, running_stack

pytestmark = pytest.mark.docker

FAST = dict(trials=2, timing_budget_s=0.2, compile_baseline=False, timing_pool=2)
COMPILE = [*CLI, "worker", "compile", "--concurrency", "1"]


@pytest.fixture(scope="module")
def stack(cpu_settings) -> Iterator[LiveStack]:  # type: ignore[no-untyped-def]
    with running_stack("evalsvc-cancel-", {"cancel-cpu": "gpu.cancel-cpu"}, 1) as s:
        yield s


def _case(expect: str):  # type: ignore[no-untyped-def]
    return next(c for c in cases("cpu") if c.task_id == "l1/relu" and c.expect == expect)


def _request(task_id: str, expect: str, n: int) -> EvaluationRequest:
    opts = EvalOptions(**{**FAST, "timing_budget_s": 0.2 + n * 0.001})  # distinct evaluations
    return EvaluationRequest(task_id=task_id, solution=_case(expect).solution(), options=opts)


def _skipped(stack: LiveStack, job_id: str) -> bool:
    return f"job {job_id} is done already (cancelled): compile delivery skipped" in stack.log("compile")


def test_cancelled_work_never_runs_and_the_rest_is_pushed(stack: LiveStack) -> None:
    with Client(stack.url) as client:
        task_id = client.register_task(small_task("l1/relu"))
        stack.stop_one("compile")  # from here on everything submitted stays queued
        try:
            kept = client.submit_batch([_request(task_id, "ok", 0), _request(task_id, "incorrect", 1)])
            doomed = client.submit_batch([_request(task_id, "ok", 2), _request(task_id, "ok", 3)])
            single = client.submit(task_id, _case("ok").solution(), EvalOptions(**{**FAST, "trials": 3}))
            assert client.batch(doomed).items[0].state is State.QUEUED
            cancelled = client.cancel_batch(doomed)
            assert (cancelled.cancelled, cancelled.finished) == (2, 0)
            view = client.cancel(single.id)
            assert view.status is Status.CANCELLED and view.reward is None
            assert client.cancel(single.id).result == view.result  # idempotent
        finally:
            stack.spawn("compile", COMPILE)

        events = list(client.stream_batch(kept))  # pushed as they finish, then done
        results = {e.result.index: e.result.item for e in events if e.result is not None}
        assert [e.kind for e in events] == ["result", "result", "done"]
        assert results[0].status is Status.OK and (results[0].reward or 0) >= 1, results
        assert results[1].status is Status.INCORRECT and results[1].reward == -1, results
        summary = events[-1].summary
        assert summary is not None and summary.statuses == {"ok": 1, "incorrect": 1}

        # resumed after the first event: the other item, then done
        first, *_ = (e.result.index for e in events if e.result is not None)
        resumed = list(client.stream_batch(kept, last_event_id=events[0].cursor))
        assert [e.kind for e in resumed] == ["result", "done"]
        assert resumed[0].result is not None and resumed[0].result.index == 1 - first

        # a finished one is not cancelled
        with pytest.raises(ApiError) as err:
            client.cancel(results[0].id)
        assert err.value.status == 409 and err.value.code == "already_finished"

        # the compile worker took every cancelled job's message, found it done and ran nothing of it
        doomed_ids = [item.id for item in client.batch(doomed).items]
        deadline = time.monotonic() + 300  # how long the worker takes is not under test: it must happen
        for job_id in [*doomed_ids, single.id]:
            while not _skipped(stack, job_id):
                assert time.monotonic() < deadline, stack.log("compile")
                time.sleep(0.5)
            got = client.get(job_id)
            assert got.status is Status.CANCELLED and got.reward is None, got
            assert got.deliveries.compile == 0 and got.deliveries.evaluate == 0, got
