"""Cancelling jobs: a tenant ends its own unfinished evaluations, atomically against the workers' writes.

A cancellation is a terminal result like any other (`Status.CANCELLED`, no reward), written by the same
kind of once-only script as `JobStore.finish`: whichever of the cancellation and a worker's result lands
first is the job's answer for good. A cancelled job never runs later (a worker that picks up its message
finds it done and skips it), and one that is running keeps running to its end on its worker, whose result
is then refused as a second write: the reward of a cancelled evaluation is never given.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from enum import StrEnum

from evalsvc.core.outcomes import cancelled
from evalsvc.core.results import Status
from evalsvc.records.documents import BrokenJob, Job, State
from evalsvc.records.jobs import JobStore
from evalsvc.records.keys import PROGRESS, UNQUEUED, finished_channel, inflight_key, job_key

# KEYS: the job, the tenant's in-flight counter, the unqueued and progress indexes. ARGV: the cancelled
# document, retention s, job id, its finished channel, SHA-1 of the document it was made from. Written
# only when the stored document is still that one (a worker's save in between: the caller reads again).
# Returns 1 (cancelled now), 0 (it is done already), -1 (no job), -2 (changed meanwhile).
_CANCEL = """
local s = redis.call('HGET', KEYS[1], 'state')
if s == false then return -1 end
if s == 'done' then return 0 end
if redis.sha1hex(redis.call('HGET', KEYS[1], 'doc') or '') ~= ARGV[5] then return -2 end
redis.call('HSET', KEYS[1], 'doc', ARGV[1], 'state', 'done', 'cancelled', '1')
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]))
redis.call('DECR', KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[3])
redis.call('ZREM', KEYS[4], ARGV[3])
redis.call('PUBLISH', ARGV[4], ARGV[3])
return 1
"""

MAX_TRIES = 8  # compare-and-set rounds against a worker saving the job meanwhile (each save is one)


class Outcome(StrEnum):
    CANCELLED = "cancelled"  # cancelled by this call
    ALREADY_CANCELLED = "already_cancelled"  # an earlier cancellation ended it
    FINISHED = "finished"  # it had ended otherwise (a verdict, or our own error)
    GONE = "gone"  # no such job (expired)


@dataclass(frozen=True)
class Cancellation:
    outcome: Outcome
    job: Job | None  # as stored after the call (None: gone, or a record that no longer reads as a job)
    was: State | None = None  # the state it was cancelled in (outcome CANCELLED)


class Canceller:
    """Cancels jobs in a `JobStore` (its Redis client; the gateway holds one)."""

    def __init__(self, store: JobStore) -> None:
        self.store = store
        self._cancel = store.r.register_script(_CANCEL)

    def cancel(self, job_id: str, message: str) -> Cancellation:
        """End the job `cancelled` unless it is done; says how it stands afterwards."""
        for _ in range(MAX_TRIES):
            raw = self.store.r.hget(job_key(job_id), "doc")
            if raw is None:
                return Cancellation(Outcome.GONE, None)
            try:
                job = Job.model_validate_json(raw)
            except ValueError:  # failed as unreadable (record_unreadable) by the store's own reader
                self.store.read_job(job_id)
                return Cancellation(Outcome.FINISHED, None)
            if job.state is State.DONE:
                return Cancellation(ended_outcome(job), job)
            was = job.state
            job.state, job.updated_at = State.DONE, time.time()
            job.result = cancelled(message)
            keys = [job_key(job_id), inflight_key(job.tenant), UNQUEUED, PROGRESS]
            sha = hashlib.sha1(raw if isinstance(raw, bytes) else raw.encode()).hexdigest()
            doc = job.model_dump_json()
            args: list[str | int] = [doc, self.store.retention_s, job_id, finished_channel(job_id), sha]
            got = int(self._cancel(keys=keys, args=args))
            if got == 1:
                return Cancellation(Outcome.CANCELLED, job, was)
            if got == -1:
                return Cancellation(Outcome.GONE, None)
            # 0: a worker finished it meanwhile; -2: a worker saved it meanwhile. Read it again.
        raise RuntimeError(f"job {job_id} kept changing while it was being cancelled")


def ended_outcome(job: Job | BrokenJob) -> Outcome:
    """How a job that is done already stands against a cancellation."""
    cancelled_before = job.result is not None and job.result.status is Status.CANCELLED
    return Outcome.ALREADY_CANCELLED if cancelled_before else Outcome.FINISHED
