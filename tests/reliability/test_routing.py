"""A compiled job whose device class has no live worker does not hold a compile slot while it waits
(issue 20, item 4): it held one for `route_wait_s` (120 s), and two such jobs made an ordinary evaluation
take 119.5 s. Heartbeats are written by the workers' own code (`WorkerRegistry.heartbeat`)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from bench.live_stack import LiveStack, wait_for
from evalsvc.core.results import CompileReport, Status
from evalsvc.core.solutions import Solution
from evalsvc.queues import EVALUATE_TASK, ROUTE_TASK
from evalsvc.records.documents import Job, JobKind, State, WorkerInfo
from evalsvc.records.jobs import JobStore
from evalsvc.records.keys import PROGRESS
from evalsvc.records.workers import WorkerRegistry
from evalsvc.settings import Settings
from tests.api.conftest import redis_server, redis_url  # noqa: F401 - fixtures
from tests.reliability.conftest import options, small_relu, wait_done
from workers import celery_app, tasks
from workers.context import ROUTE_RECHECK_S, WorkerContext


def worker(queue: str, device_class: str, age_s: float = 0.0) -> WorkerInfo:
    return WorkerInfo(
        queue=queue,
        kind="gpu",
        device_class=device_class,
        device="cpu",
        hostname="test-" + queue,
        pid=1,
        heartbeat_at=time.time() - age_s,
    )


class Sent:
    """What the worker hands to Celery (`send_task` of the route and evaluate tasks, by name), recorded."""

    NAMES = {ROUTE_TASK: "route", EVALUATE_TASK: "evaluate"}

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def send_task(self, name: str, **kw: Any) -> None:
        self.calls.append((self.NAMES[name], kw))


@pytest.fixture
def ctx(
    redis_url: str,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[WorkerContext, Sent]]:
    settings = Settings(redis_url=redis_url, data_dir=tmp_path, route_wait_s=600)
    context = WorkerContext(settings)
    sent = Sent()
    monkeypatch.setattr(celery_app.app, "send_task", sent.send_task)
    monkeypatch.setattr(tasks, "_ctx", lambda: context)
    yield context, sent
    context.redis.close()


def compiled(store: JobStore, device_class: str) -> Job:
    """A job just compiled by the compile stage, as `compile_and_route` holds it when it routes."""
    now = time.time()
    job = Job(
        id=f"e_{device_class}_{time.monotonic_ns()}",
        kind=JobKind.EVALUATE,
        state=State.QUEUED,
        solution=Solution(files={"solution.py": "x = 1\n"}),
        device_class=device_class,
        created_at=now,
        updated_at=now,
    )
    store.create_job(job, dedup_key=job.id, idempotency_key=None)
    store.mark_queued(job.id)
    store.advance(job, State.COMPILING)
    job.artifact_key = "artifact-" + job.id
    job.compile_report = CompileReport(ok=True)
    return job


def test_a_job_with_no_live_worker_of_its_class_is_parked_not_waited_for(
    ctx: tuple[WorkerContext, Sent],
) -> None:
    context, sent = ctx
    store = context.jobs
    context.workers.heartbeat(worker("gpu.h200", "H200"))  # another class is served
    job = compiled(store, "A100")
    deadline = time.time() + 600
    context.route(job, deadline)  # returns at once: no loop waits for a worker here
    [(name, kw)] = sent.calls
    stored = store.get_job(job.id)
    assert stored is not None and stored.state is State.COMPILING
    assert stored.artifact_key == job.artifact_key and stored.compile_report is not None  # the build is kept
    assert store.r.zscore(PROGRESS, job.id) == pytest.approx(stored.updated_at)  # progress: no stall resend
    assert name == "route" and kw["countdown"] == ROUTE_RECHECK_S and kw["queue"] == "compile"
    assert kw["args"] == [job.id, deadline, stored.updated_at]

    # Checked again with still no worker of the class: parked again, by a message naming the new save.
    tasks.route_job(*kw["args"])
    assert [n for n, _ in sent.calls] == ["route", "route"]
    again = sent.calls[1][1]["args"]
    assert again[2] == store.get_job(job.id).updated_at != kw["args"][2]  # type: ignore[union-attr]
    tasks.route_job(*kw["args"])  # a duplicate of the first message (a broker redelivery): stale, ignored
    assert len(sent.calls) == 2

    # The class comes back: the next check routes the job to its worker's queue.
    context.workers.heartbeat(worker("gpu.a100", "A100"))
    tasks.route_job(*again)
    assert sent.calls[2] == ("evaluate", {"args": [job.id], "queue": "gpu.a100"})
    routed = store.get_job(job.id)
    assert routed is not None and routed.state is State.RUNNING and routed.queue == "gpu.a100"
    tasks.route_job(*again)  # a late duplicate finds it routed
    assert len(sent.calls) == 3


def test_a_parked_job_fails_at_its_deadline(ctx: tuple[WorkerContext, Sent]) -> None:
    context, sent = ctx
    store = context.jobs
    context.workers.heartbeat(worker("gpu.h200", "H200"))
    job = compiled(store, "A100")
    context.route(job, time.time() + 600)
    parked_at = store.get_job(job.id).updated_at  # type: ignore[union-attr]
    tasks.route_job(job.id, time.time() - 1, parked_at)  # its deadline has passed
    done = store.get_job(job.id)
    assert done is not None and done.state is State.DONE and done.result is not None
    assert done.result.status is Status.INTERNAL_ERROR
    assert "no live GPU worker serves device class 'A100' (waited 600 s)" in (done.result.message or "")
    assert done.result.compile is not None  # the compile report is kept in the answer
    assert store.inflight("anonymous") == 0 and store.r.zscore(PROGRESS, job.id) is None
    assert [n for n, _ in sent.calls] == ["route"]


def test_route_wait_zero_fails_at_once(ctx: tuple[WorkerContext, Sent]) -> None:
    context, sent = ctx
    job = compiled(context.jobs, "A100")
    context.route(job, time.time())
    done = context.jobs.get_job(job.id)
    assert done is not None and done.state is State.DONE and sent.calls == []


# -- on the live stack: real Celery workers ----------------------------------------------------------------


@pytest.mark.docker
def test_jobs_waiting_for_a_device_class_do_not_hold_compile_slots(stack: LiveStack, task_id: str) -> None:
    """Two jobs for a class whose worker went away (the stack's compile worker has two slots) wait parked;
    an ordinary evaluation submitted after them finishes while they still wait; when a worker of their
    class beats again they are routed to it and finish too."""
    client: redis.Redis = stack.redis()
    registry = WorkerRegistry(client)
    try:
        gone = worker("gpu.cpu-a", "gone-class", age_s=20)  # beat 20 s ago: within route_wait_s, not live
        registry.heartbeat(gone, ttl_s=1)
        wait_for(
            lambda: not client.exists("evalsvc:worker:gpu.cpu-a:test-gpu.cpu-a"), 30, "the key to expire"
        )
        _, sol = small_relu()
        parked = []
        for n in (901, 902):
            body = {"task_id": task_id, "solution": sol.model_dump(mode="json"), "options": options(n)}
            r = httpx.post(
                stack.url + "/v1/evaluations", json={**body, "device_class": "gone-class"}, timeout=30
            )
            assert r.status_code == 202, r.text
            parked.append(r.json()["id"])

        def is_parked(job_id: str) -> bool:
            doc = json.loads(client.hget(f"evalsvc:job:{job_id}", "doc") or b"{}")
            return doc.get("state") == "compiling" and doc.get("artifact_key") is not None

        wait_for(lambda: all(is_parked(j) for j in parked), 300, "both jobs to be compiled and parked")
        body = {"task_id": task_id, "solution": sol.model_dump(mode="json"), "options": options(903)}
        r = httpx.post(stack.url + "/v1/evaluations", json=body, timeout=30)
        assert r.status_code == 202, r.text
        assert wait_done(stack, r.json()["id"], timeout=300)["status"] == "ok"
        assert all(is_parked(j) for j in parked)  # still waiting: they held no slot the evaluation needed
        assert "no live GPU worker serves 'gone-class'" in stack.log("compile", limit=10**7)

        def beat_and_check() -> bool:  # a worker of the class is back: the CPU worker's queue, as the class
            registry.heartbeat(worker("gpu.cpu-a", "gone-class"))
            return all(client.hget(f"evalsvc:job:{j}", "state") == b"done" for j in parked)

        wait_for(beat_and_check, 300, "the parked jobs to be routed and finish", interval=2.0)
        assert [wait_done(stack, j)["status"] for j in parked] == ["ok", "ok"]
    finally:
        client.delete("evalsvc:worker:gpu.cpu-a:test-gpu.cpu-a")
        client.zrem("evalsvc:device-classes", "gone-class")
        client.close()
