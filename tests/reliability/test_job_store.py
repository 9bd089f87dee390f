"""The job store under concurrency, on a real redis-server: one request retried at once makes one job."""

from __future__ import annotations

import threading
import time

import redis

from evalsvc.api.enqueue import RecordingEnqueuer
from evalsvc.api.orphans import requeue_orphans
from evalsvc.core.results import EvaluationResult, Status
from evalsvc.core.solutions import Solution
from evalsvc.service.records import Job, JobKind, State
from evalsvc.service.state import JobStore
from tests.api.conftest import redis_server, redis_url  # noqa: F401 - fixtures

ROUNDS, CLIENTS = 200, 8


def _job(job_id: str) -> Job:
    now = time.time()
    return Job(
        id=job_id,
        kind=JobKind.EVALUATE,
        state=State.QUEUED,
        solution=Solution(files={"solution.py": "x = 1\n"}),
        created_at=now,
        updated_at=now,
    )


def test_concurrent_creates_with_one_key_make_one_job(redis_url: str) -> None:  # noqa: F811
    """The check-then-claim of keys was two round trips: a retry arriving between them made a second
    job (8 rounds in 200 before the create became one Lua script)."""
    client = redis.Redis.from_url(redis_url)
    store = JobStore(client)
    doubled = []
    for n in range(ROUNDS):
        ids: list[str] = []

        def create(i: int, n: int = n, ids: list[str] = ids) -> None:
            job, _ = store.create_job(_job(f"e_{n}_{i}"), dedup_key=f"d{n}", idempotency_key=f"k{n}")
            ids.append(job.id)

        threads = [threading.Thread(target=create, args=(i,)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if len(set(ids)) != 1:
            doubled.append(n)
    assert doubled == []
    assert len(list(client.scan_iter("evalsvc:job:*"))) == ROUNDS
    assert store.inflight("anonymous") == ROUNDS
    client.close()


def test_a_job_stored_but_never_queued_is_swept_into_the_queue(redis_url: str) -> None:  # noqa: F811
    """The gateway died between storing a job and queueing it (seen in the soak as accepted ids that
    never finished): the sweep queues it once; queued and finished jobs are left alone."""
    client = redis.Redis.from_url(redis_url)
    store = JobStore(client)
    enqueuer = RecordingEnqueuer()
    store.create_job(_job("e_orphan"), dedup_key="d-orphan", idempotency_key=None)
    queued, _ = store.create_job(_job("e_queued"), dedup_key="d-queued", idempotency_key=None)
    store.mark_queued(queued.id)
    finished, _ = store.create_job(_job("e_finished"), dedup_key="d-finished", idempotency_key=None)
    store.finish(finished, EvaluationResult(status=Status.FORBIDDEN, reward=-1))
    assert requeue_orphans(store, enqueuer, grace_s=60) == []  # still within the grace period
    assert requeue_orphans(store, enqueuer, grace_s=0) == ["e_orphan"]
    assert requeue_orphans(store, enqueuer, grace_s=0) == []
    assert enqueuer.job_ids == ["e_orphan"]
    client.close()


def test_a_retry_after_our_own_error_gets_a_fresh_job(redis_url: str) -> None:  # noqa: F811
    """The queue refused a job (503 queue_unavailable, the job ended as our internal error); the client
    retries with the same Idempotency-Key: it must get a new job, not that error (seen in the soak)."""
    client = redis.Redis.from_url(redis_url)
    store = JobStore(client)
    first, existed = store.create_job(_job("e_first"), dedup_key="d-same", idempotency_key="k-same")
    assert not existed
    store.finish(first, EvaluationResult(status=Status.INTERNAL_ERROR, reward=-1))
    retry, existed = store.create_job(_job("e_retry"), dedup_key="d-same", idempotency_key="k-same")
    assert (retry.id, existed) == ("e_retry", False)
    again, existed = store.create_job(_job("e_again"), dedup_key="d-same", idempotency_key="k-same")
    assert (again.id, existed) == ("e_retry", True)
    client.close()
