"""The job store under concurrency, on a real redis-server: one request retried at once makes one job."""

from __future__ import annotations

import threading
import time

import redis

from evalsvc.api.enqueue import RecordingEnqueuer
from evalsvc.api.orphans import requeue_orphans, requeue_stalled
from evalsvc.core.results import EvaluationResult, Status
from evalsvc.core.solutions import Solution
from evalsvc.queues import COMPILE_QUEUE
from evalsvc.records.documents import EvaluationView, Job, JobKind, State
from evalsvc.records.jobs import JobStore
from evalsvc.records.keys import PROGRESS
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


def test_creates_survive_a_flushed_script_cache(redis_url: str) -> None:  # noqa: F811
    """Jobs are created by the script's hash alone (no SCRIPT EXISTS trip): after the server forgets its
    scripts (as a restart does), the next create loads it again and every job is stored once."""
    client = redis.Redis.from_url(redis_url)
    store = JobStore(client)
    try:
        store.create_job(_job("e_before"), dedup_key="d-before", idempotency_key=None)
        client.script_flush()
        made = store.create_jobs([(_job(f"e_after_{i}"), f"d-after-{i}", None) for i in range(3)])
        again, existed = store.create_job(_job("e_dup"), dedup_key="d-after-1", idempotency_key=None)
        store.mark_queued("e_before", *(j.id for j, _ in made))  # not left for the sweep tests below
    finally:
        client.close()
    assert [(j.id, existed) for j, existed in made] == [(f"e_after_{i}", False) for i in range(3)]
    assert again.id == "e_after_1" and existed


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


def test_a_job_whose_message_was_lost_is_sent_again_once_its_queue_is_empty(
    redis_url: str,  # noqa: F811
) -> None:
    """Kombu pops a message before it records it as unacked: a Redis restart in between loses it, and
    the job (seen: 1 of 4 after a restart) never finishes. The stall sweep sends it again, but only when
    its queue is empty (else it may still be waiting there), and only once per stall period."""
    client = redis.Redis.from_url(redis_url)
    store = JobStore(client)
    enqueuer = RecordingEnqueuer()
    lost, _ = store.create_job(_job("e_lost"), dedup_key="d-lost", idempotency_key=None)
    routed, _ = store.create_job(_job("e_routed"), dedup_key="d-routed", idempotency_key=None)
    routed.queue = "gpu.test-worker"
    store.advance(routed, State.RUNNING)
    finished, _ = store.create_job(_job("e_done"), dedup_key="d-done", idempotency_key=None)
    store.finish(finished, EvaluationResult(status=Status.FORBIDDEN, reward=-1))
    assert client.zscore(PROGRESS, "e_done") is None  # a finished job leaves the index

    assert requeue_stalled(store, enqueuer, after_s=60) == []  # progress within the period
    client.rpush(COMPILE_QUEUE, b"someone else's message")
    client.rpush("gpu.test-worker", b"someone else's message")
    assert requeue_stalled(store, enqueuer, after_s=0) == []  # both may still be waiting in line
    client.delete(COMPILE_QUEUE)
    assert requeue_stalled(store, enqueuer, after_s=0) == ["e_lost"]
    assert requeue_stalled(store, enqueuer, after_s=60) == []  # sent again counts as progress
    client.delete("gpu.test-worker")
    assert sorted(requeue_stalled(store, enqueuer, after_s=0)) == ["e_lost", "e_routed"]
    assert sorted(enqueuer.job_ids) == ["e_lost", "e_lost", "e_routed"]
    store.finish(lost, EvaluationResult(status=Status.FORBIDDEN, reward=-1))
    store.finish(routed, EvaluationResult(status=Status.FORBIDDEN, reward=-1))
    assert requeue_stalled(store, enqueuer, after_s=0) == [] and client.zcard(PROGRESS) == 0
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


def test_deliveries_are_counted_per_stage_through_overlapping_saves(redis_url: str) -> None:  # noqa: F811
    """A compile that outlives the broker's visibility timeout is delivered again while it runs (seen under
    load in `test_worker_killed_mid_evaluation_finishes_the_job_once`): both copies route the job, each
    saving its own copy of the document, and the second routing restarts the device stage's `attempts`
    under a running evaluation. `deliveries` still counts every delivery of each stage."""
    client = redis.Redis.from_url(redis_url)
    store = JobStore(client)
    job, _ = store.create_job(_job("e_twice"), dedup_key="d-twice", idempotency_key=None)
    store.mark_queued(job.id)
    assert store.bump_attempts(job.id, "compile") == 1
    first = store.get_job(job.id)
    assert store.bump_attempts(job.id, "compile") == 2  # the broker's copy, while the first still runs
    second = store.get_job(job.id)
    assert first is not None and second is not None
    for routed in (first, second):  # each copy routes the job to its device stage
        routed.attempts = 0
        assert store.advance(routed, State.RUNNING)
        assert store.bump_attempts(job.id, "evaluate") == 1  # the stage's count was restarted under it
    seen = store.get_job(job.id)
    assert seen is not None and seen.attempts == 1  # what the device side alone would report
    assert seen.deliveries.model_dump() == {"compile": 2, "evaluate": 2}
    assert store.finish(first, EvaluationResult(status=Status.FORBIDDEN, reward=-1))  # a stale copy finishes
    assert store.bump_attempts(job.id, "evaluate") == 0  # a delivery after the end is not counted
    done = store.get_job(job.id)
    assert done is not None and done.deliveries.model_dump() == {"compile": 2, "evaluate": 2}
    assert EvaluationView.of(done).deliveries == done.deliveries
    [batched] = store.get_jobs([job.id])
    assert isinstance(batched, Job) and batched.deliveries == done.deliveries
    assert b"deliveries" not in (client.hget("evalsvc:job:" + job.id, "doc") or b"")  # only in the hash
    client.close()
