"""Redis as the system of record: tasks, jobs, dedup and idempotency keys, batches, worker heartbeats.

Celery only carries job ids; every state change and every result lands here. A result is written once:
the finishing write is a Lua script that refuses a job already `done`, so a redelivered task can never
count twice; creation is one script too, so concurrent retries of one request make one job.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import time
from collections.abc import Iterable
from typing import Any, cast

import redis
from pydantic import ValidationError
from redis.commands.core import Script

from evalsvc.core.options import EvalOptions
from evalsvc.core.results import CompileReport, EvaluationResult, Status
from evalsvc.core.tasks import TaskSpec
from evalsvc.service.records import (
    BrokenJob,
    Deliveries,
    Job,
    JobKind,
    ProfileRecord,
    State,
    TaskView,
    WorkerInfo,
)

log = logging.getLogger("evalsvc.store")

P = "evalsvc:"
UNQUEUED = P + "unqueued"  # zset: job id -> creation time, until its message is in the queue
PROGRESS = P + "progress"  # zset: job id -> time of its last state change, until it is done
# zset: GPU worker device class -> its newest heartbeat: which classes are served now, and which were
# served a moment ago (a worker restarting); kept beside the workers' own keys, which expire
DEVICE_CLASSES = P + "device-classes"
HEARTBEAT_TTL_S = 15  # a worker beats every 5 s; its key outlives three missed beats
DEVICE_CLASS_MEMORY_S = 7 * 86400  # classes unseen for longer are forgotten
SHARED_TASKS = P + "tasks"  # zset: task id -> registration time, of the tasks every tenant may read

FINISHED = P + "finished:"  # pub/sub channel prefix: a job's id is published on FINISHED + id once it is done


def finished_channel(job_id: str) -> str:
    """Where the write that ends a job announces it (at most once, to whoever listens then: readers
    that must not miss one re-read the job after subscribing)."""
    return FINISHED + job_id


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
# ('cancelled', set by service.cancellation) is served by its Idempotency-Key (the same request, the same
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


def _task_scope(owner: str | None) -> tuple[str, str]:
    """A task namespace's index (zset: task id -> registration time) and names (hash: task id -> JSON
    name): a tenant's, or the shared one (None)."""
    if owner is None:
        return SHARED_TASKS, P + "task-names"
    return P + "tenant-tasks:" + owner, P + "tenant-task-names:" + owner


def _queue_visibility(pipe: redis.client.Pipeline, task_ids: list[str], owner: str | None) -> None:
    for t in task_ids:
        pipe.exists(P + "task:" + t)
        pipe.zscore(SHARED_TASKS, t)
        if owner is not None:
            pipe.zscore(_task_scope(owner)[0], t)


def _unknown(task_ids: list[str], replies: list[Any], owner: str | None) -> list[str]:
    """The ids `owner` may not use, from the replies `_queue_visibility` queued."""
    step = 2 if owner is None else 3
    out = []
    for i, t in enumerate(task_ids):
        stored, *scores = replies[step * i : step * i + step]
        if not stored or all(s is None for s in scores):
            out.append(t)
    return out


def job_key(job_id: str) -> str:
    """The Redis hash that holds a job: its document (`doc`), `state` and delivery counts."""
    return P + "job:" + job_id


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(10)}"


class UnreadableJob(Exception):
    """A stored job record that does not read as a `Job`; `broken` is what could still be read of it."""

    def __init__(self, broken: BrokenJob) -> None:
        super().__init__(f"job {broken.id}: {broken.reason}")
        self.broken = broken


# The scalar fields of a record whose JSON no longer parses (a torn write), each its first `"name": value`
# pair: a job's document lists them before any nested field of the same name could, and JSON escapes every
# quote inside a string value, so the text of a solution cannot fake one.
_SCALARS = ("id", "kind", "task_id", "tenant", "created_at", "updated_at", "attempts")
_PAIR = rb'"%s"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?[0-9][0-9.eE+-]{0,30}|null)'
_SCALAR_RES = {name: re.compile(_PAIR % name.encode()) for name in _SCALARS}


def _scan(raw: bytes) -> dict[str, Any]:
    """Best effort: the scalar fields still readable in a document that does not parse as JSON."""
    out = {}
    for name, pattern in _SCALAR_RES.items():
        found = pattern.search(raw)
        if found:
            try:
                out[name] = json.loads(found.group(1))
            except ValueError:
                continue
    return out


def _text(v: bytes | str) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes) else v


def _why(e: Exception) -> str:
    """A short reason, naming fields but never quoting their values (a source may be megabytes)."""
    if isinstance(e, ValidationError):
        errs = e.errors(include_url=False, include_input=False)
        parts = [f"{'.'.join(map(str, err['loc'])) or 'document'}: {err['msg']}" for err in errs[:3]]
        more = f"; and {len(errs) - 3} more" if len(errs) > 3 else ""
        return "; ".join(parts)[:500] + more
    return f"{type(e).__name__}: {e}"[:500]


def _salvage(job_id: str, raw: bytes | None, fields: dict[str, str], reason: str) -> BrokenJob:
    """What can be read of a broken record: the hash's own fields, then whatever of the document parses."""
    doc: dict[str, Any] = {}
    tenant: str | None = None
    if raw is not None:
        try:
            parsed = json.loads(raw)
        except ValueError:
            doc = _scan(raw)
            tenant = doc.get("tenant") if isinstance(doc.get("tenant"), str) else None  # torn before it: lost
        else:
            if isinstance(parsed, dict):
                doc = parsed
                t = doc.get("tenant", Job.model_fields["tenant"].default)  # absent: the model's default
                tenant = t if isinstance(t, str) else None
    kind = doc.get("kind")
    if kind not in {k.value for k in JobKind}:
        kind = {"e": JobKind.EVALUATE, "c": JobKind.COMPILE}.get(job_id.split("_", 1)[0])
    try:
        options = EvalOptions.model_validate(doc.get("options") or {})
    except ValidationError:
        options = EvalOptions()
    stored = fields.get("state")
    state = State(stored) if stored in {s.value for s in State} else State.DONE  # none or garbage: ended

    def number(name: str) -> float:
        v = doc.get(name)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0.0

    task_id = doc.get("task_id")
    return BrokenJob(
        id=job_id,
        reason=fields.get("unreadable") or reason,
        state=state,
        kind=kind,
        tenant=tenant,
        task_id=task_id if isinstance(task_id, str) else None,
        created_at=number("created_at"),
        updated_at=number("updated_at"),
        attempts=int(number("attempts")),
        options=options,
    )


class JobStore:
    def __init__(
        self, client: redis.Redis, retention_s: int = 7 * 86400, idempotency_ttl_s: int = 86400
    ) -> None:
        self.r = client
        self.retention_s = retention_s
        self.idempotency_ttl_s = idempotency_ttl_s
        self._finish = client.register_script(_FINISH)
        self._advance = client.register_script(_ADVANCE)
        self._create = client.register_script(_CREATE)
        self._fail_unreadable = client.register_script(_FAIL_UNREADABLE)
        self._delivered = client.register_script(_DELIVERED)

    # tasks -------------------------------------------------------------------------------------------
    # A task's document is stored once, by content hash; who may see it is kept apart, per namespace: the
    # shared one (SHARED_TASKS, the operator's: CLI imports, auth off, and every task stored before
    # tenancy) and one per tenant. Each namespace keeps its own registration time and name, so a tenant
    # registering content another registered first learns nothing of that (not its name, not its time).
    def put_task(self, spec: TaskSpec, owner: str | None = None) -> tuple[str, bool]:
        """Store the task in `owner`'s namespace (None: the shared one). True when it is new to that
        owner: neither in its namespace nor shared already."""
        tid = spec.id
        now = time.time()
        doc = json.dumps({"spec": spec.model_dump(mode="json"), "created_at": now})
        index, names = _task_scope(owner)
        pipe = self.r.pipeline(transaction=True)
        pipe.set(P + "task:" + tid, doc, nx=True)
        pipe.zscore(SHARED_TASKS, tid)
        pipe.zadd(index, {tid: now}, nx=True)
        pipe.hsetnx(names, tid, json.dumps(spec.name))
        _, shared_before, added, _ = pipe.execute()
        return tid, bool(added) and (owner is None or shared_before is None)

    def get_task(self, task_id: str) -> TaskSpec | None:
        """The task's spec whoever registered it: for the workers, which run jobs already admitted."""
        raw = self.r.get(P + "task:" + task_id)
        return TaskSpec.model_validate(json.loads(raw)["spec"]) if raw else None

    def task_view(self, task_id: str, owner: str | None = None) -> TaskView | None:
        """The task as `owner` sees it, or None when it is not in its namespace nor shared (None: the
        shared namespace alone)."""
        return self._task_views([task_id], owner)[0]

    def _task_views(self, task_ids: list[str], owner: str | None) -> list[TaskView | None]:
        pipe = self.r.pipeline(transaction=False)
        own_index, own_names = _task_scope(owner)
        for t in task_ids:
            pipe.get(P + "task:" + t)
            pipe.smembers(P + "task-warnings:" + t)
            pipe.zscore(SHARED_TASKS, t)
            pipe.hget(P + "task-names", t)
            pipe.zscore(own_index, t)
            pipe.hget(own_names, t)
        replies = pipe.execute()
        out: list[TaskView | None] = []
        for i, t in enumerate(task_ids):
            raw, warnings, shared_at, shared_name, own_at, own_name = replies[6 * i : 6 * i + 6]
            if not raw or (shared_at is None and own_at is None):
                out.append(None)
                continue
            d = json.loads(raw)
            if own_at is not None:
                name = json.loads(own_name) if own_name is not None else None
            else:  # a shared task stored before tenancy has its name in its document only
                name = json.loads(shared_name) if shared_name is not None else d["spec"].get("name")
            out.append(
                TaskView(
                    id=t,
                    name=name,
                    meta=d["spec"]["meta"],
                    created_at=min(s for s in (shared_at, own_at) if s is not None),
                    warnings=sorted(w.decode() for w in warnings),
                    shared=shared_at is not None,
                )
            )
        return out

    def missing_tasks(self, task_ids: list[str]) -> list[str]:
        """The ids among `task_ids` that are not stored at all, whoever registered them (the operator's
        view, one round trip); `unknown_tasks` is a tenant's."""
        pipe = self.r.pipeline(transaction=False)
        for t in task_ids:
            pipe.exists(P + "task:" + t)
        return [t for t, found in zip(task_ids, pipe.execute(), strict=True) if not found]

    def unknown_tasks(self, task_ids: list[str], owner: str | None) -> list[str]:
        """The ids among `task_ids` that `owner` may not use: not stored, or neither its own nor shared.
        Another tenant's task is as unknown as one that never existed (one round trip)."""
        pipe = self.r.pipeline(transaction=False)
        _queue_visibility(pipe, task_ids, owner)
        return _unknown(task_ids, pipe.execute(), owner)

    def add_task_warnings(self, task_id: str, warnings: list[str]) -> None:
        """What the GPU side learned about the task (its outputs can be matched by zeros, ...)."""
        if warnings:
            self.r.sadd(P + "task-warnings:" + task_id, *warnings)

    def list_tasks(self, offset: int = 0, limit: int = 100, owner: str | None = None) -> list[TaskView]:
        """`owner`'s tasks and the shared ones, in registration order (None: the shared ones alone)."""
        stop = offset + limit - 1
        ids: list[bytes]
        if owner is None:
            ids = cast(list[bytes], self.r.zrange(SHARED_TASKS, offset, stop))
        else:
            scratch = P + "scratch:tasks:" + secrets.token_hex(8)
            pipe = self.r.pipeline(transaction=True)
            pipe.zunionstore(scratch, [SHARED_TASKS, _task_scope(owner)[0]], aggregate="MIN")
            pipe.zrange(scratch, offset, stop)
            pipe.delete(scratch)
            ids = pipe.execute()[1]
        views = self._task_views([i.decode() for i in ids], owner)
        return [v for v in views if v is not None]

    # jobs --------------------------------------------------------------------------------------------
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
            idem = P + "idem:" + idempotency_key if idempotency_key else ""
            dedup = P + "dedup:" + dedup_key if dedup_key else ""
            keys = [idem, dedup, self._job_key(job.id), P + "inflight:" + job.tenant, UNQUEUED, PROGRESS]
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

    def _claim(self, key: str, value: str, ttl: int) -> str | None:
        """SET NX; returns the value already there, or None when this call claimed the key."""
        if self.r.set(key, value, nx=True, ex=ttl):
            return None
        raw = cast(bytes | None, self.r.get(key))  # the client does not decode responses
        return raw.decode() if raw else None

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
            raise UnreadableJob(_salvage(job_id, None, {}, "the key holds no job record")) from None
        if raw is None:
            if not self.r.exists(key):
                return None
            raise UnreadableJob(self._broken(job_id, None, "the record has no document"))
        try:
            job = Job.model_validate_json(raw)
        except Exception as e:  # whatever refused it: JSON, a missing field, a value the models now refuse
            raise UnreadableJob(self._broken(job_id, raw, _why(e))) from e
        job.deliveries = _deliveries(counts)
        return job

    def _broken(self, job_id: str, raw: bytes | str | None, reason: str) -> BrokenJob:
        got = self.r.hmget(self._job_key(job_id), "state", "unreadable")
        fields = {name: _text(v) for name, v in zip(("state", "unreadable"), got, strict=True) if v}
        return _salvage(job_id, raw.encode() if isinstance(raw, str) else raw, fields, reason)

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
            P + "inflight:" + broken.tenant if broken.tenant else "",
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
        keys = [self._job_key(job.id), P + "inflight:" + job.tenant, PROGRESS]
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
        pipe.get(P + "inflight:" + tenant)
        _queue_visibility(pipe, task_ids, owner)
        depth, inflight, *found = pipe.execute()
        return int(depth), int(inflight or 0), _unknown(task_ids, found, owner)

    def inflight(self, tenant: str) -> int:
        return int(self.r.get(P + "inflight:" + tenant) or 0)

    # reference profiles ------------------------------------------------------------------------------
    def _profile_key(self, task_id: str, device_class: str) -> str:
        return P + "profile:" + task_id + ":" + device_class

    def claim_profile(self, record: ProfileRecord) -> tuple[ProfileRecord, bool]:
        """Store a new queued profile unless one exists for (task, device class); True when it existed.
        One that failed is replaced, so asking again retries it."""
        key = self._profile_key(record.task_id, record.device_class)
        if self.r.set(key, record.model_dump_json(), nx=True, ex=self.retention_s):
            return record, False
        existing = self.get_profile(record.task_id, record.device_class)
        if existing is not None and existing.error is None:
            return existing, True
        self.r.set(key, record.model_dump_json(), ex=self.retention_s)
        return record, False

    def put_profile(self, record: ProfileRecord) -> None:
        record.updated_at = time.time()
        key = self._profile_key(record.task_id, record.device_class)
        self.r.set(key, record.model_dump_json(), ex=self.retention_s)

    def get_profile(self, task_id: str, device_class: str) -> ProfileRecord | None:
        raw = self.r.get(self._profile_key(task_id, device_class))
        return ProfileRecord.model_validate_json(raw) if raw else None

    def drop_profile(self, task_id: str, device_class: str) -> None:
        self.r.delete(self._profile_key(task_id, device_class))

    # batches -----------------------------------------------------------------------------------------
    def create_batch(self, job_ids: list[str], idempotency_key: str | None = None) -> tuple[str, bool]:
        bid = new_id("b")
        if idempotency_key:
            existing = self._claim(P + "idem:" + idempotency_key, bid, self.idempotency_ttl_s)
            if existing:
                return existing, True
        self.r.set(P + "batch:" + bid, json.dumps(job_ids), ex=self.retention_s)
        return bid, False

    def get_batch(self, batch_id: str) -> list[str] | None:
        raw = self.r.get(P + "batch:" + batch_id)
        return json.loads(raw) if raw else None

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

    # workers -----------------------------------------------------------------------------------------
    def heartbeat(self, info: WorkerInfo, ttl_s: int = HEARTBEAT_TTL_S) -> None:
        """A worker is alive: its key (gone `ttl_s` after its last beat) and, for a device worker, its
        class's last beat (what submissions are checked against, `device_classes`)."""
        pipe = self.r.pipeline(transaction=False)
        pipe.set(P + "worker:" + info.queue + ":" + info.hostname, info.model_dump_json(), ex=ttl_s)
        if info.kind == "gpu":
            pipe.zadd(DEVICE_CLASSES, {info.device_class: info.heartbeat_at}, gt=True)
            pipe.zremrangebyscore(DEVICE_CLASSES, 0, info.heartbeat_at - DEVICE_CLASS_MEMORY_S)
        pipe.execute()

    def device_classes(self, within_s: float) -> dict[str, float]:
        """Device classes some GPU worker beat for within the last `within_s`: class -> its newest beat."""
        got = self.r.zrangebyscore(DEVICE_CLASSES, time.time() - within_s, "+inf", withscores=True)
        return {_text(c): float(t) for c, t in cast("list[tuple[bytes, float]]", got)}

    def workers(self) -> list[WorkerInfo]:
        keys = list(self.r.scan_iter(P + "worker:*", count=1000))
        raws = self.r.mget(keys) if keys else []
        return [WorkerInfo.model_validate_json(r) for r in raws if r]

    def queue_depth(self, queue: str) -> int:
        return int(self.r.llen(queue))

    def idempotent_lookup(self, key: str) -> str | None:
        raw = cast(bytes | None, self.r.get(P + "idem:" + key))  # the client does not decode responses
        return raw.decode() if raw else None
