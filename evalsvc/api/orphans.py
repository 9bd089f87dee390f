"""The orphan sweep: a job stored but never queued (its gateway died between the two steps) is queued.

Without it such a job stays `queued` forever, and a client retrying with the same Idempotency-Key (or
the same content) is handed that job again: an accepted submission that is never answered. A job queued
twice is harmless (the workers skip finished jobs; a result is written once).
"""

from __future__ import annotations

import logging

import anyio
import redis
from anyio import to_thread
from kombu.exceptions import OperationalError

from evalsvc.api.enqueue import Enqueuer
from evalsvc.service.records import State
from evalsvc.service.state import JobStore

log = logging.getLogger("evalsvc.api")

SWEEP_EVERY_S = 5.0
GRACE_S = 10.0  # longer than a submission takes from store to queue


def requeue_orphans(store: JobStore, enqueuer: Enqueuer, grace_s: float = GRACE_S) -> list[str]:
    """Queue the jobs stored more than `grace_s` ago and still not queued; the ids queued."""
    queued = []
    for job_id in store.unqueued(grace_s):
        job = store.get_job(job_id)
        if job is not None and job.state is State.QUEUED:
            enqueuer.enqueue(job_id)
            queued.append(job_id)
        store.mark_queued(job_id)
    if queued:
        log.warning("queued %d orphaned job(s) stored by a gateway that died: %s", len(queued), queued[:10])
    return queued


async def sweep_forever(store: JobStore, enqueuer: Enqueuer, every_s: float = SWEEP_EVERY_S) -> None:
    """The gateway's background loop (every gateway process runs one; duplicates are harmless)."""
    while True:
        await anyio.sleep(every_s)
        try:
            await to_thread.run_sync(requeue_orphans, store, enqueuer)
        except (redis.RedisError, OperationalError) as e:
            log.warning("orphan sweep skipped: %s", e)
