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

One bad record must not stop recovery for everyone: a record that no longer reads as a job (corrupt JSON,
fields missing, stored options the models now refuse) is failed (`internal_error`, failure
`record_unreadable`) and dropped from both indexes; any other error on one record is logged and the
others are swept; an unexpected error of a whole pass is logged and the next pass runs on time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio
import redis
from anyio import to_thread

from evalsvc.queues import COMPILE_QUEUE, Enqueuer, QueueUnavailable
from evalsvc.records.documents import BrokenJob, State
from evalsvc.records.jobs import JobStore

log = logging.getLogger("evalsvc.api")

SWEEP_EVERY_S = 5.0
GRACE_S = 10.0  # longer than a submission takes from store to queue

# Errors that say the store or the broker is away: the pass stops (the next one retries), no record is
# to blame for them.
OUTAGES = (redis.ConnectionError, redis.TimeoutError, QueueUnavailable)


def _each(what: str, job_ids: list[str], sweep_one: Callable[[str], None]) -> None:
    """`sweep_one` for every id; an error on one record is logged with its traceback and the others go on."""
    for job_id in job_ids:
        try:
            sweep_one(job_id)
        except OUTAGES:
            raise
        except Exception:
            log.exception("%s sweep: job %s could not be handled; it is tried again next pass", what, job_id)


def requeue_orphans(store: JobStore, enqueuer: Enqueuer, grace_s: float = GRACE_S) -> list[str]:
    """Queue the jobs stored more than `grace_s` ago and still not queued; the ids queued."""
    queued = []

    def sweep_one(job_id: str) -> None:
        job = store.read_job(job_id)  # an unreadable record is failed there, and leaves the index
        if job is not None and not isinstance(job, BrokenJob) and job.state is State.QUEUED:
            enqueuer.enqueue(job_id)
            queued.append(job_id)
        store.mark_queued(job_id)

    _each("orphan", store.unqueued(grace_s), sweep_one)
    if queued:
        log.warning("queued %d orphaned job(s) stored by a gateway that died: %s", len(queued), queued[:10])
    return queued


def requeue_stalled(store: JobStore, enqueuer: Enqueuer, after_s: float) -> list[str]:
    """Send again the jobs without progress for `after_s` whose queue is empty; the ids sent.

    A job behind others in a non-empty queue may just be waiting, so it is left until the queue drains.
    A job running longer than `after_s` is sent again too, as the broker itself redelivers it then."""
    sent = []
    depths: dict[str, int] = {}  # each queue read once per sweep

    def sweep_one(job_id: str) -> None:
        job = store.read_job(job_id)  # an unreadable record is failed there, and leaves the index
        if job is not None and not isinstance(job, BrokenJob) and job.state is not State.DONE:
            queue = job.queue if job.state is State.RUNNING and job.queue else COMPILE_QUEUE
            if queue not in depths:
                depths[queue] = store.queue_depth(queue)
            if depths[queue] > 0:
                return
            enqueuer.enqueue(job_id)
            sent.append(job_id)
        store.touch(job_id)

    _each("stall", store.stalled(after_s), sweep_one)
    if sent:
        log.warning("sent %d stalled job(s) again (their message was lost): %s", len(sent), sent[:10])
    return sent


def sweep_once(store: JobStore, enqueuer: Enqueuer, stall_after_s: float, grace_s: float = GRACE_S) -> None:
    """One pass of both sweeps."""
    requeue_orphans(store, enqueuer, grace_s)
    requeue_stalled(store, enqueuer, stall_after_s)


async def sweep_forever(
    store: JobStore,
    enqueuer: Enqueuer,
    redelivery_after_s: float,
    every_s: float = SWEEP_EVERY_S,
    grace_s: float = GRACE_S,
) -> None:
    """The gateway's background loop (every gateway process runs one; duplicates are harmless). It ends
    only when cancelled: an error in one pass is logged and the next pass runs `every_s` later."""
    stall_after_s = 2 * redelivery_after_s  # after the broker's own redelivery had its chance
    while True:
        await anyio.sleep(every_s)
        try:
            await to_thread.run_sync(sweep_once, store, enqueuer, stall_after_s, grace_s)
        except (redis.RedisError, QueueUnavailable) as e:
            log.warning("sweep skipped: %s", e)
        except Exception:
            log.exception("sweep pass failed; the next one runs in %g s", every_s)
