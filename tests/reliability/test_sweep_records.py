"""The gateway's sweep survives bad stored records (issue 20, item 4), on a real redis-server with the real
Celery enqueuer: one record that no longer reads as a job used to end the sweep loop silently, and stall
and orphan recovery stopped for every tenant until the gateway restarted."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time

import pytest
import redis

from evalsvc.api.enqueue import CeleryEnqueuer
from evalsvc.api.orphans import sweep_forever
from evalsvc.core.results import FailureKind, Status
from evalsvc.core.solutions import Solution
from evalsvc.queues import COMPILE_QUEUE
from evalsvc.records.documents import BrokenJob, Job, JobKind, State
from evalsvc.records.jobs import JobStore
from evalsvc.records.keys import PROGRESS, UNQUEUED
from evalsvc.settings import Settings
from tests.api.conftest import redis_server, redis_url  # noqa: F401 - fixtures

TENANT = "tenant-a"


def _job(job_id: str, tenant: str = TENANT, source: str = "x = 1\n") -> Job:
    now = time.time()
    return Job(
        id=job_id,
        kind=JobKind.EVALUATE,
        state=State.QUEUED,
        solution=Solution(files={"solution.py": source}),
        tenant=tenant,
        created_at=now,
        updated_at=now,
    )


def _doc(job: Job) -> dict:
    return json.loads(job.model_dump_json())


class FlakyStore(JobStore):
    """The real store, whose first read of the orphan index fails with an error nobody expects."""

    passes = 0  # every pass reads the orphan index once, first

    def unqueued(self, older_than_s: float, limit: int = 1000) -> list[str]:
        self.passes += 1
        if self.passes == 1:
            raise RuntimeError("injected: an unexpected error in one sweep pass")
        return super().unqueued(older_than_s, limit)


class PoisonedEnqueuer:
    """The real Celery enqueuer, except that queueing one job raises an error nobody expects."""

    def __init__(self, real: CeleryEnqueuer, poison: str) -> None:
        self.real, self.poison = real, poison

    def enqueue(self, job_id: str) -> None:
        if job_id == self.poison:
            raise TypeError("injected: an unexpected error on one record")
        self.real.enqueue(job_id)

    def enqueue_profile(self, task_id: str, device_class: str, queue: str) -> None:
        self.real.enqueue_profile(task_id, device_class, queue)

    def enqueue_many(self, job_ids: list[str]) -> None:
        self.real.enqueue_many(job_ids)

    def close(self) -> None:
        self.real.close()


def _queued_ids(client: redis.Redis) -> list[str]:
    """The job ids of the Celery messages in the compile queue."""
    bodies = [
        json.loads(base64.b64decode(json.loads(raw)["body"])) for raw in client.lrange(COMPILE_QUEUE, 0, -1)
    ]
    return [args[0] for args, _kwargs, _embed in bodies]


def test_bad_records_are_failed_and_the_sweep_goes_on(
    redis_url: str,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = redis.Redis.from_url(redis_url)
    store = FlakyStore(client)
    enqueuer = PoisonedEnqueuer(CeleryEnqueuer.from_settings(Settings(redis_url=redis_url)), "e_poison")
    bad: dict[str, str] = {}  # job id -> what is wrong with it

    # Stored as the gateway stores them (indexes, quota), then their documents spoilt in place.
    for job_id in ("e_good", "e_poison", "e_options", "e_fields", "e_twonames", "e_torn", "e_torn_early"):
        tenant = "tenant-torn" if job_id == "e_torn_early" else TENANT
        store.create_job(_job(job_id, tenant, source="x = 1\n" * 50), dedup_key=job_id, idempotency_key=None)
    store.mark_queued("e_good", "e_poison", "e_options", "e_torn")  # the others are orphans as well
    key = "evalsvc:job:"

    doc = _doc(_job("e_options"))
    doc["options"]["timing_budget_s"] = 1e9  # options the models refuse now
    client.hset(key + "e_options", "doc", json.dumps(doc))
    bad["e_options"] = "options.timing_budget_s"
    doc = _doc(_job("e_fields"))
    del doc["solution"], doc["created_at"]
    client.hset(key + "e_fields", "doc", json.dumps(doc))
    bad["e_fields"] = "solution: Field required"
    doc = _doc(_job("e_twonames"))
    doc["solution"]["files"]["./solution.py"] = "y = 2\n"  # accepted once, refused since
    client.hset(key + "e_twonames", "doc", json.dumps(doc))
    bad["e_twonames"] = "two files name 'solution.py'"
    whole = _job("e_torn", source="x = 1\n" * 50).model_dump_json()
    client.hset(key + "e_torn", "doc", whole[: len(whole) - 30])  # a torn write: the owner is still there
    bad["e_torn"] = "Invalid JSON"
    whole = _job("e_torn_early", "tenant-torn", source="x = 1\n" * 50).model_dump_json()
    client.hset(key + "e_torn_early", "doc", whole[:60])  # the owner is lost
    bad["e_torn_early"] = "Invalid JSON"
    client.set(key + "e_string", "not a hash")  # another type of key under a job's name
    client.zadd(PROGRESS, {"e_string": 0})
    client.zadd(PROGRESS, {b"\xff\xfe": 0})  # not even an id
    assert store.inflight(TENANT) == 6

    async def main() -> None:
        sweep = asyncio.create_task(
            sweep_forever(store, enqueuer, redelivery_after_s=0, every_s=0.05, grace_s=0)
        )
        deadline = time.monotonic() + 60
        while not ("e_good" in _queued_ids(client) and client.zcard(UNQUEUED) == 0):
            assert not sweep.done(), sweep
            assert time.monotonic() < deadline, (client.zrange(PROGRESS, 0, -1), _queued_ids(client))
            await asyncio.sleep(0.05)
        passes_then = store.passes
        while store.passes < passes_then + 2:  # two more whole passes
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        assert not sweep.done(), "the sweep loop ended"
        sweep.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sweep

    with caplog.at_level(logging.WARNING):
        asyncio.run(main())

    # The first pass failed as a whole, and was logged with its traceback; the loop went on.
    failed_pass = [r for r in caplog.records if r.getMessage().startswith("sweep pass failed")]
    assert failed_pass and failed_pass[0].exc_info is not None
    # The good stalled job was sent again (once: its message is still in the queue); the poisoned one was
    # logged with its traceback and left pending, not failed.
    poisoned = [r for r in caplog.records if "job e_poison could not be handled" in r.getMessage()]
    assert poisoned and poisoned[0].exc_info is not None
    assert _queued_ids(client) == ["e_good"]
    assert store.get_job("e_good").state is State.QUEUED  # type: ignore[union-attr]
    assert client.zscore(PROGRESS, "e_poison") is not None
    assert client.hget(key + "e_poison", "state") == b"queued"
    # Each bad record ended as our own error, with a reason; it left both indexes.
    for job_id, why in bad.items():
        broken = store.read_job(job_id)
        assert isinstance(broken, BrokenJob), job_id
        assert broken.state is State.DONE and broken.result is not None
        assert broken.result.status is Status.INTERNAL_ERROR, job_id
        assert broken.result.failure is FailureKind.RECORD_UNREADABLE, job_id
        assert "could not be read" in (broken.result.message or "") and why in broken.reason, (job_id, broken)
        assert client.hget(key + job_id, "internal") == b"1"
        assert client.hget(key + job_id, "unreadable") is not None
    assert client.zcard(UNQUEUED) == 0
    assert sorted(store.stalled(0)) == ["e_good", "e_poison"]  # the sweep's index holds the good ones only
    assert store.read_job("e_torn").tenant == TENANT  # type: ignore[union-attr]
    # The quota of a failed record is given back where its owner could be read (4 of them); the one whose
    # owner is lost keeps its unit.
    assert store.inflight(TENANT) == 2
    assert store.inflight("tenant-torn") == 1
    assert client.get(key + "e_string") == b"not a hash"  # left alone, but out of the sweep's way
    enqueuer.close()
    client.close()
