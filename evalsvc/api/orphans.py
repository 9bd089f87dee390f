"""The gateway's sweeps for jobs whose message is gone: an accepted submission must get an answer.

- Orphans: a job stored but never queued (its gateway died between the two steps). Without the sweep it
  stays `queued` forever, and a client retrying with the same Idempotency-Key (or the same content) is
  handed that job again.
- Stalled jobs: no state change for twice `redelivery_after_s` while the queue it waits in is empty.
  The broker lost its message: Kombu's Redis transport pops a message (BRPOP) before it records it as
  unacked, so a Redis restart between the two drops it (seen as one job in a batch of four never
  finishing after a restart). The job is sent to its compile stage again; a cached build routes it on.
  The broker gets the first period: a message unacked by a killed worker is put back by Kombu itself
  once `redelivery_after_s` old, which is also when the job's last progress (that delivery starting)
  turns that old. Sweeping at the same age sent a second copy beside Kombu's, and the two deliveries
  counted two attempts for one interruption (seen: a job killed once ended `job_abandoned`).

A job queued twice is harmless: the workers skip finished jobs and a result is written once.
"""

from __future__ import annotations

import logging

import anyio
import redis
from anyio import to_thread

from evalsvc.api.enqueue import Enqueuer, QueueUnavailable
from evalsvc.service.records import State
from evalsvc.service.state import JobStore
from workers.celery_app import COMPILE_QUEUE

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


def requeue_stalled(store: JobStore, enqueuer: Enqueuer, after_s: float) -> list[str]:
    """Send again the jobs without progress for `after_s` whose queue is empty; the ids sent.

    A job behind others in a non-empty queue may just be waiting, so it is left until the queue drains.
    A job running longer than `after_s` is sent again too, as the broker itself redelivers it then."""
    sent = []
    depths: dict[str, int] = {}  # each queue read once per sweep
    for job_id in store.stalled(after_s):
        job = store.get_job(job_id)
        if job is not None and job.state is not State.DONE:
            queue = job.queue if job.state is State.RUNNING and job.queue else COMPILE_QUEUE
            if queue not in depths:
                depths[queue] = store.queue_depth(queue)
            if depths[queue] > 0:
                continue
            enqueuer.enqueue(job_id)
            sent.append(job_id)
        store.touch(job_id)
    if sent:
        log.warning("sent %d stalled job(s) again (their message was lost): %s", len(sent), sent[:10])
    return sent


async def sweep_forever(
    store: JobStore, enqueuer: Enqueuer, redelivery_after_s: float, every_s: float = SWEEP_EVERY_S
) -> None:
    """The gateway's background loop (every gateway process runs one; duplicates are harmless)."""
    stall_after_s = 2 * redelivery_after_s  # after the broker's own redelivery had its chance
    while True:
        await anyio.sleep(every_s)
        try:
            await to_thread.run_sync(requeue_orphans, store, enqueuer)
            await to_thread.run_sync(requeue_stalled, store, enqueuer, stall_after_s)
        except (redis.RedisError, QueueUnavailable) as e:
            log.warning("sweep skipped: %s", e)
