"""Jobs: their records, the scripts that create, advance and end them, the sweeps' indexes and the
tenant's count of unfinished jobs (what admission reads).

Celery only carries job ids; every state change and every result lands here. A result is written once:
the finishing write is a Lua script that refuses a job already `done`, so a redelivered task can never
count twice; creation is one script too, so concurrent retries of one request make one job.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

import redis
from redis.commands.core import Script

from evalsvc.core.results import CompileReport, EvaluationResult, Status
from evalsvc.records.documents import BrokenJob, Deliveries, Job, State
from evalsvc.records.idempotency import idempotency_key as idem_key
from evalsvc.records.keys import PROGRESS, UNQUEUED, P, finished_channel, inflight_key, job_key, text
from evalsvc.records.salvage import UnreadableJob, salvage, why
from evalsvc.records.tasks import queue_visibility, unknown

log = logging.getLogger("evalsvc.store")

# KEYS: the job, the tenant's in-flight counter or '', the progress index. ARGV: doc, retention s, internal
# flag, job id, its finished channel. Returns 1 (written), 0 (already done) or -1 (no job).
_FINISH = """
if redis.call('HGET', KEYS[1], 'state') == false then return -1 end
if redis.call('HGET', KEYS[1], 'state') == 'done' then return 0 end
redis.call('HSET', KEYS[1], 'doc', ARGV[1], 'state', 'done', 'internal', ARGV[3])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]))
if KEYS[2] ~= '' then redis.call('DECR', KEYS[2]) end
redis.call('ZREM', KEYS[3], ARGV[4])
redis.call('PUBLISH', ARGV[5], ARGV[4])
return 1
"""

# KEYS: idempotency key or '', dedup key or '', the new job's key, the tenant's in-flight counter, the set of
# jobs not yet handed to the queue, the progress index. ARGV: job id, doc, state, retention s, idempotency
# ttl s, job key prefix, now.
# Returns {id, 'idem' | 'dedup' | 'new'}.
# A job that ended in our own error ('internal' set by _FINISH: it could not be queued, it was abandoned)
# is served again neither by content nor by its Idempotency-Key: a retry gets a fresh job. A cancelled one
# ('cancelled', set by records.cancellation) is served by its Idempotency-Key (the same request, the same
# answer), never by content: new work is not answered with someone's cancellation.
_CREATE = """
local prefix = ARGV[6]
if KEYS[1] ~= '' then
  local id = redis.call('GET', KEYS[1])
  local live = id and redis.call('EXISTS', prefix .. id) == 1
  if live and redis.call('HGET', prefix .. id, 'internal') ~= '1' then return {id, 'idem'} end
end
if KEYS[2] ~= '' then
  local id = redis.call('GET', KEYS[2])
  local live = id and redis.call('EXISTS', prefix .. id) == 1
  local served = live and redis.call('HGET', prefix .. id, 'internal') ~= '1'
  if served and redis.call('HGET', prefix .. id, 'cancelled') ~= '1' then
    if KEYS[1] ~= '' then redis.call('SET', KEYS[1], id, 'EX', tonumber(ARGV[5])) end
    return {id, 'dedup'}
  end
  redis.call('SET', KEYS[2], ARGV[1], 'EX', tonumber(ARGV[4]))
end
if KEYS[1] ~= '' then redis.call('SET', KEYS[1], ARGV[1], 'EX', tonumber(ARGV[5])) end
redis.call('HSET', KEYS[3], 'doc', ARGV[2], 'state', ARGV[3])
redis.call('EXPIRE', KEYS[3], tonumber(ARGV[4]))
redis.call('INCR', KEYS[4])
redis.call('ZADD', KEYS[5], tonumber(ARGV[7]), ARGV[1])
redis.call('ZADD', KEYS[6], tonumber(ARGV[7]), ARGV[1])
return {ARGV[1], 'new'}
"""

# KEYS: the job, the tenant's in-flight counter or '', the unqueued and progress indexes. ARGV: job id,
# reason, retention s, its finished channel. A record that cannot be read is failed as our own error
# (never served again by content or Idempotency-Key) and leaves both sweeps' indexes; the unreadable
# document is kept as it is.
# Returns 1 (failed now), 0 (it had ended already) or -1 (no job hash: gone, or another type of key).
_FAIL_UNREADABLE = """
local kind = redis.call('TYPE', KEYS[1])
if type(kind) == 'table' then kind = kind['ok'] end
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
if kind ~= 'hash' then return -1 end
local was = redis.call('HGET', KEYS[1], 'state')
redis.call('HSET', KEYS[1], 'state', 'done', 'internal', '1', 'unreadable', ARGV[2])
if was == 'done' then return 0 end
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
if KEYS[2] ~= '' then redis.call('DECR', KEYS[2]) end
redis.call('PUBLISH', ARGV[4], ARGV[1])
return 1
"""

# KEYS: the job. ARGV: the stage delivered (a field of `Deliveries`). One more delivery of that stage,
# counted in the job's hash beside its document: every delivery saves its own copy of the document, so a
# count kept in it is lost when two deliveries overlap (the broker's redelivery of a compile still
# running). A job done or gone is not counted. Returns the stage's new count, 0 when not counted.
_DELIVERED = """
local s = redis.call('HGET', KEYS[1], 'state')
if s == false or s == 'done' then return 0 end
return redis.call('HINCRBY', KEYS[1], 'deliveries:' .. ARGV[1], 1)
"""
DELIVERY_FIELDS = tuple("deliveries:" + stage for stage in Deliveries.model_fields)


def _deliveries(counts: list[Any]) -> Deliveries:
    """The job hash's delivery counts (`DELIVERY_FIELDS`, in order; absent: none yet)."""
    return Deliveries(**{s: int(c) for s, c in zip(Deliveries.model_fields, counts, strict=True) if c})


_ADVANCE = """
local s = redis.call('HGET', KEYS[1], 'state')
if s == false or s == 'done' then return 0 end
redis.call('HSET', KEYS[1], 'doc', ARGV[1], 'state', ARGV[2])
redis.call('ZADD', KEYS[2], tonumber(ARGV[3]), ARGV[4])
return 1
"""


REPLICA_WAIT_MS = 1000  # replication on one network takes milliseconds; a replica this far behind is away
REPLICA_MAX_LAG_S = 10  # a replica silent longer (Redis' min-replicas-max-lag default) is not waited for
REPLICATION_FENCE = P + "replication-fence"  # a counter, written to wait for the replicas (`durable`)


class NotReplicated(redis.RedisError):
    """The primary's replica did not acknowledge the writes in time: a failover now could lose them (a 503;
    the client retries with its Idempotency-Key, which finds the same job)."""


class JobStore:
    def __init__(
        self,
        client: redis.Redis,
        retention_s: int = 7 * 86400,
        idempotency_ttl_s: int = 86400,
        replicated: bool = False,
    ) -> None:
        """`replicated`: a submission is acknowledged once the primary's replica holds it (`durable`)."""
        self.r = client
        self.retention_s = retention_s
        self.idempotency_ttl_s = idempotency_ttl_s
        self.replicated = replicated
        self._finish = client.register_script(_FINISH)
        self._advance = client.register_script(_ADVANCE)
        self._create = client.register_script(_CREATE)
        self._fail_unreadable = client.register_script(_FAIL_UNREADABLE)
        self._delivered = client.register_script(_DELIVERED)

    def _job_key(self, job_id: str) -> str:
        return job_key(job_id)

    def create_job(self, job: Job, dedup_key: str | None, idempotency_key: str | None) -> tuple[Job, bool]:
        """Store a new job, or return the existing one for the same idempotency or dedup key.

        One Lua script, so concurrent retries of one request (same Idempotency-Key, or same content)
        can never both create a job: the check and the claim are one step.
        """
        return self.create_jobs([(job, dedup_key, idempotency_key)])[0]

    def create_jobs(self, items: list[tuple[Job, str | None, str | None]]) -> list[tuple[Job, bool]]:
        """`create_job` for many (job, dedup key, idempotency key) at once: one round trip for all
        (a pipeline of the same script, each call still atomic), so a batch of 512 is not 512 trips."""
        now = time.time()
        calls = []
        for job, dedup_key, idempotency_key in items:
            idem = idem_key(idempotency_key) if idempotency_key else ""
            dedup = P + "dedup:" + dedup_key if dedup_key else ""
            keys = [idem, dedup, self._job_key(job.id), inflight_key(job.tenant), UNQUEUED, PROGRESS]
            doc, ttls = job.model_dump_json(), (self.retention_s, self.idempotency_ttl_s)
            calls.append([len(keys), *keys, job.id, doc, job.state.value, *ttls, self._job_key(""), now])
        out = []
        replies = self._evalsha_pipeline(self._create, calls)
        for (job, _, _), (raw_id, how) in zip(items, replies, strict=True):
            if how == b"new":
                out.append((job, False))
                continue
            try:
                found = self.get_job(raw_id.decode())
            except UnreadableJob as e:  # failed now, so that the script passes it by: a fresh job
                self.fail_unreadable(e.broken)
                out.append(self.create_job(job, dedup_key, idempotency_key))
                continue
            if found is None:  # expired between the script and this read: store this one after all
                out.append(self.create_job(job, None, None))
            else:
                out.append((found, True))
        return out

    def _evalsha_pipeline(self, script: Script, calls: list[list[Any]]) -> list[Any]:
        """Run `script` once per call in one pipelined round trip. By its hash alone: redis-py's pipeline
        would first ask SCRIPT EXISTS, a second round trip on every submission. When the server lost
        its script cache (a restart), none of the calls ran: load it and send them again."""

        def send() -> list[Any]:
            pipe = self.r.pipeline(transaction=False)
            for call in calls:
                pipe.evalsha(script.sha, *call)
            return pipe.execute()

        try:
            return send()
        except redis.exceptions.NoScriptError:
            self.r.script_load(script.script)
            return send()

    def durable(self) -> None:
        """Return once a replica holds every write made so far, by any client; `NotReplicated` when none
        does within `REPLICA_WAIT_MS`. Replication is asynchronous: a primary that dies takes the writes
        its replica had not received yet, and Sentinel promotes that replica. A primary with no replica in
        sync (none connected, or none heard from for `REPLICA_MAX_LAG_S`: the first seconds after a
        failover, a replica away) is not waited for: what it acknowledges is on it alone (docs/operations.md).
        Redis' WAIT counts only its own connection's writes: a fence write on that connection first makes
        them everyone's (a replayed submission wrote nothing itself, yet its job may be in flight)."""
        if not self.replicated:
            return
        replication = self.r.info("replication")
        in_sync = [
            v
            for k, v in replication.items()
            if k.startswith("slave") and isinstance(v, dict) and v.get("state") == "online"
            if int(v.get("lag", 0)) <= REPLICA_MAX_LAG_S
        ]
        if not in_sync:
            return
        pipe = self.r.pipeline(transaction=False)  # one connection for both: WAIT's writes are its own
        pipe.incr(REPLICATION_FENCE)
        pipe.wait(1, REPLICA_WAIT_MS)
        if pipe.execute()[1] < 1:
            raise NotReplicated(
                f"the Redis replica did not acknowledge the submission within {REPLICA_WAIT_MS} ms; "
                "retry with the same Idempotency-Key"
            )

    def mark_queued(self, *job_ids: str) -> None:
        """The jobs' messages are in the queue: they no longer need the orphan sweep."""
        if job_ids:
            self.r.zrem(UNQUEUED, *job_ids)

    def unqueued(self, older_than_s: float, limit: int = 1000) -> list[str]:
        """Jobs stored but not (known to be) queued for longer than `older_than_s`: their gateway died
        between the two steps, or the queue refused the message."""
        ids = self.r.zrangebyscore(UNQUEUED, 0, time.time() - older_than_s, start=0, num=limit)
        return self._ids(UNQUEUED, ids)

    def stalled(self, older_than_s: float, limit: int = 1000) -> list[str]:
        """Jobs not done whose state has not changed for `older_than_s` (oldest first)."""
        ids = self.r.zrangebyscore(PROGRESS, 0, time.time() - older_than_s, start=0, num=limit)
        return self._ids(PROGRESS, ids)

    def _ids(self, index: str, raw: Iterable[Any]) -> list[str]:
        """Members of a sweep index as ids; one that is not even text names no job and is dropped."""
        out = []
        for i in raw:
            try:
                out.append(i.decode())
            except UnicodeDecodeError:
                self.r.zrem(index, i)
        return out

    def touch(self, job_id: str) -> None:
        """Count now as the job's last progress (its message was sent again), or forget a finished or
        expired job. Reads the state field alone, so a record whose document is broken is handled too."""
        try:
            state = self.r.hget(self._job_key(job_id), "state")
        except redis.ResponseError:  # not a job hash at all
            state = None
        if state is None or state == State.DONE.value.encode():
            self.r.zrem(PROGRESS, job_id)
        else:
            self.r.zadd(PROGRESS, {job_id: time.time()})

    def get_job(self, job_id: str) -> Job | None:
        """The job, None when there is none; `UnreadableJob` when its record no longer reads as a job
        (see `read_job` for readers that must answer for every record)."""
        key = self._job_key(job_id)
        try:
            raw, *counts = self.r.hmget(key, "doc", *DELIVERY_FIELDS)
        except redis.ResponseError as e:
            if "WRONGTYPE" not in str(e):
                raise
            raise UnreadableJob(salvage(job_id, None, {}, "the key holds no job record")) from None
        if raw is None:
            if not self.r.exists(key):
                return None
            raise UnreadableJob(self._broken(job_id, None, "the record has no document"))
        try:
            job = Job.model_validate_json(raw)
        except Exception as e:  # whatever refused it: JSON, a missing field, a value the models now refuse
            raise UnreadableJob(self._broken(job_id, raw, why(e))) from e
        job.deliveries = _deliveries(counts)
        return job

    def _broken(self, job_id: str, raw: bytes | str | None, reason: str) -> BrokenJob:
        got = self.r.hmget(self._job_key(job_id), "state", "unreadable")
        fields = {name: text(v) for name, v in zip(("state", "unreadable"), got, strict=True) if v}
        return salvage(job_id, raw.encode() if isinstance(raw, str) else raw, fields, reason)

    def read_job(self, job_id: str) -> Job | BrokenJob | None:
        """`get_job` for readers that must answer for every record (the gateway's GETs and sweeps, the
        workers): a record that no longer reads as a job is failed (`fail_unreadable`), and what can be
        read of it is returned, done, to answer with."""
        try:
            return self.get_job(job_id)
        except UnreadableJob as e:
            return self.fail_unreadable(e.broken)

    def fail_unreadable(self, broken: BrokenJob) -> BrokenJob:
        """End a job whose record cannot be read as our own error (`internal_error`, failure
        `record_unreadable`): its tenant's quota is given back when the tenant can be read, both sweeps
        forget it, and neither its content nor its Idempotency-Key serves it again. Idempotent."""
        keys = [
            self._job_key(broken.id),
            inflight_key(broken.tenant) if broken.tenant else "",
            UNQUEUED,
            PROGRESS,
        ]
        args: list[str | int] = [broken.id, broken.reason, self.retention_s, finished_channel(broken.id)]
        if self._fail_unreadable(keys=keys, args=args) == 1:
            log.error(
                "job %s: its stored record cannot be read (%s); failed as internal_error",
                broken.id,
                broken.reason,
            )
        return broken.model_copy(update={"state": State.DONE})

    def advance(self, job: Job, state: State) -> bool:
        """Move a job that is not done yet to `state` (and save its other fields)."""
        job.state = state
        job.updated_at = time.time()
        keys = [self._job_key(job.id), PROGRESS]
        args = [job.model_dump_json(), state.value, job.updated_at, job.id]
        return bool(self._advance(keys=keys, args=args))

    def bump_attempts(self, job_id: str, stage: str) -> int:
        """A delivery of `stage` begins: counted in `deliveries` (atomically, never reset) and as one more
        attempt of the stage the job is in; the attempts so far, 0 when the job is done or gone."""
        if stage not in Deliveries.model_fields:
            raise ValueError(f"no stage {stage!r}")
        job = self.get_job(job_id)
        if job is None or job.state is State.DONE:
            return 0
        counted = self._delivered(keys=[self._job_key(job_id)], args=[stage])
        if not counted:
            return 0
        setattr(job.deliveries, stage, int(counted))
        job.attempts += 1
        self.advance(job, job.state)
        return job.attempts

    def finish(
        self, job: Job, result: EvaluationResult | None = None, report: CompileReport | None = None
    ) -> bool:
        """Record the terminal result once; False when the job was already done (or is gone)."""
        job.state = State.DONE
        job.updated_at = time.time()
        if result is not None:
            job.result = result
        if report is not None:
            job.compile_report = report
        keys = [self._job_key(job.id), inflight_key(job.tenant), PROGRESS]
        internal = "1" if job.result is not None and job.result.status is Status.INTERNAL_ERROR else "0"
        args: list[str | int] = [
            job.model_dump_json(),
            self.retention_s,
            internal,
            job.id,
            finished_channel(job.id),
        ]
        return self._finish(keys=keys, args=args) == 1

    def admission_facts(
        self, queue: str, tenant: str, task_ids: list[str], owner: str | None = None
    ) -> tuple[int, int, list[str]]:
        """The queue's depth, the tenant's unfinished jobs and which of `task_ids` are unknown to `owner`
        (`unknown_tasks`): what a submission is admitted on, in one round trip."""
        pipe = self.r.pipeline(transaction=False)
        pipe.llen(queue)
        pipe.get(inflight_key(tenant))
        queue_visibility(pipe, task_ids, owner)
        depth, inflight, *found = pipe.execute()
        return int(depth), int(inflight or 0), unknown(task_ids, found, owner)

    def inflight(self, tenant: str) -> int:
        return int(self.r.get(inflight_key(tenant)) or 0)

    def get_jobs(self, job_ids: list[str]) -> list[Job | BrokenJob | None]:
        """The jobs in order, one round trip; records that cannot be read are failed (`read_job`)."""
        pipe = self.r.pipeline(transaction=False)
        for j in job_ids:
            pipe.hmget(self._job_key(j), "doc", *DELIVERY_FIELDS)
        out: list[Job | BrokenJob | None] = []
        for j, reply in zip(job_ids, pipe.execute(raise_on_error=False), strict=True):
            job: Job | BrokenJob | None = None
            raw, *counts = reply if isinstance(reply, list) else [reply]
            if isinstance(raw, bytes):
                try:
                    job = Job.model_validate_json(raw)
                    job.deliveries = _deliveries(counts)
                except Exception:  # whatever refused it; read alone, failed and answered for
                    job = self.read_job(j)
            elif raw is not None:  # an error reply: not a job hash
                job = self.read_job(j)
            out.append(job)
        return out

    def queue_depth(self, queue: str) -> int:
        return int(self.r.llen(queue))
