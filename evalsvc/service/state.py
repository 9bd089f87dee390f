"""Redis as the system of record: tasks, jobs, dedup and idempotency keys, batches, worker heartbeats.

Celery only carries job ids; every state change and every result lands here. A result is written once:
the finishing write is a Lua script that refuses a job already `done`, so a redelivered task can never
count twice; creation is one script too, so concurrent retries of one request make one job.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

import redis
from redis.commands.core import Script

from evalsvc.core.results import CompileReport, EvaluationResult, Status
from evalsvc.core.tasks import TaskSpec
from evalsvc.service.records import Job, ProfileRecord, State, TaskView, WorkerInfo

P = "evalsvc:"
UNQUEUED = P + "unqueued"  # zset: job id -> creation time, until its message is in the queue
PROGRESS = P + "progress"  # zset: job id -> time of its last state change, until it is done

_FINISH = """
if redis.call('HGET', KEYS[1], 'state') == false then return -1 end
if redis.call('HGET', KEYS[1], 'state') == 'done' then return 0 end
redis.call('HSET', KEYS[1], 'doc', ARGV[1], 'state', 'done', 'internal', ARGV[3])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]))
if KEYS[2] ~= '' then redis.call('DECR', KEYS[2]) end
redis.call('ZREM', KEYS[3], ARGV[4])
return 1
"""

# KEYS: idempotency key or '', dedup key or '', the new job's key, the tenant's in-flight counter, the set of
# jobs not yet handed to the queue, the progress index. ARGV: job id, doc, state, retention s, idempotency
# ttl s, job key prefix, now.
# Returns {id, 'idem' | 'dedup' | 'new'}.
# A job that ended in our own error ('internal' set by _FINISH: it could not be queued, it was abandoned)
# is served again neither by content nor by its Idempotency-Key: a retry gets a fresh job.
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
  if live and redis.call('HGET', prefix .. id, 'internal') ~= '1' then
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

_ADVANCE = """
local s = redis.call('HGET', KEYS[1], 'state')
if s == false or s == 'done' then return 0 end
redis.call('HSET', KEYS[1], 'doc', ARGV[1], 'state', ARGV[2])
redis.call('ZADD', KEYS[2], tonumber(ARGV[3]), ARGV[4])
return 1
"""


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(10)}"


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

    # tasks -------------------------------------------------------------------------------------------
    def put_task(self, spec: TaskSpec) -> tuple[str, bool]:
        tid = spec.id
        doc = json.dumps({"spec": spec.model_dump(mode="json"), "created_at": time.time()})
        created = bool(self.r.set(P + "task:" + tid, doc, nx=True))
        if created:
            self.r.zadd(P + "tasks", {tid: time.time()})
        return tid, created

    def get_task(self, task_id: str) -> TaskSpec | None:
        raw = self.r.get(P + "task:" + task_id)
        return TaskSpec.model_validate(json.loads(raw)["spec"]) if raw else None

    def task_view(self, task_id: str) -> TaskView | None:
        raw = self.r.get(P + "task:" + task_id)
        if not raw:
            return None
        d = json.loads(raw)
        warnings = [w.decode() for w in self.r.smembers(P + "task-warnings:" + task_id)]
        return TaskView(
            id=task_id,
            name=d["spec"].get("name"),
            meta=d["spec"]["meta"],
            created_at=d["created_at"],
            warnings=sorted(warnings),
        )

    def missing_tasks(self, task_ids: list[str]) -> list[str]:
        """The ids among `task_ids` that are not registered (one round trip)."""
        pipe = self.r.pipeline(transaction=False)
        for t in task_ids:
            pipe.exists(P + "task:" + t)
        return [t for t, found in zip(task_ids, pipe.execute(), strict=True) if not found]

    def add_task_warnings(self, task_id: str, warnings: list[str]) -> None:
        """What the GPU side learned about the task (its outputs can be matched by zeros, ...)."""
        if warnings:
            self.r.sadd(P + "task-warnings:" + task_id, *warnings)

    def list_tasks(self, offset: int = 0, limit: int = 100) -> list[TaskView]:
        ids = self.r.zrange(P + "tasks", offset, offset + limit - 1)
        views = [self.task_view(i.decode()) for i in ids]
        return [v for v in views if v is not None]

    # jobs --------------------------------------------------------------------------------------------
    def _job_key(self, job_id: str) -> str:
        return P + "job:" + job_id

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
            found = self.get_job(raw_id.decode())
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
        raw = self.r.get(key)
        return raw.decode() if raw else None

    def mark_queued(self, *job_ids: str) -> None:
        """The jobs' messages are in the queue: they no longer need the orphan sweep."""
        if job_ids:
            self.r.zrem(UNQUEUED, *job_ids)

    def unqueued(self, older_than_s: float, limit: int = 1000) -> list[str]:
        """Jobs stored but not (known to be) queued for longer than `older_than_s`: their gateway died
        between the two steps, or the queue refused the message."""
        ids = self.r.zrangebyscore(UNQUEUED, 0, time.time() - older_than_s, start=0, num=limit)
        return [i.decode() for i in ids]

    def stalled(self, older_than_s: float, limit: int = 1000) -> list[str]:
        """Jobs not done whose state has not changed for `older_than_s` (oldest first)."""
        ids = self.r.zrangebyscore(PROGRESS, 0, time.time() - older_than_s, start=0, num=limit)
        return [i.decode() for i in ids]

    def touch(self, job_id: str) -> None:
        """Count now as the job's last progress (its message was sent again), or forget a finished or
        expired job."""
        job = self.get_job(job_id)
        if job is None or job.state is State.DONE:
            self.r.zrem(PROGRESS, job_id)
        else:
            self.r.zadd(PROGRESS, {job_id: time.time()})

    def get_job(self, job_id: str) -> Job | None:
        raw = self.r.hget(self._job_key(job_id), "doc")
        return Job.model_validate_json(raw) if raw else None

    def advance(self, job: Job, state: State) -> bool:
        """Move a job that is not done yet to `state` (and save its other fields)."""
        job.state = state
        job.updated_at = time.time()
        keys = [self._job_key(job.id), PROGRESS]
        args = [job.model_dump_json(), state.value, job.updated_at, job.id]
        return bool(self._advance(keys=keys, args=args))

    def bump_attempts(self, job_id: str) -> int:
        job = self.get_job(job_id)
        if job is None or job.state is State.DONE:
            return 0
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
        args = [job.model_dump_json(), self.retention_s, internal, job.id]
        return self._finish(keys=keys, args=args) == 1

    def admission_facts(self, queue: str, tenant: str, task_ids: list[str]) -> tuple[int, int, list[str]]:
        """The queue's depth, the tenant's unfinished jobs and which of `task_ids` are unknown: what a
        submission is admitted on, in one round trip."""
        pipe = self.r.pipeline(transaction=False)
        pipe.llen(queue)
        pipe.get(P + "inflight:" + tenant)
        for t in task_ids:
            pipe.exists(P + "task:" + t)
        depth, inflight, *found = pipe.execute()
        missing = [t for t, there in zip(task_ids, found, strict=True) if not there]
        return int(depth), int(inflight or 0), missing

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

    def get_jobs(self, job_ids: list[str]) -> list[Job | None]:
        pipe = self.r.pipeline()
        for j in job_ids:
            pipe.hget(self._job_key(j), "doc")
        return [Job.model_validate_json(raw) if raw else None for raw in pipe.execute()]

    # workers -----------------------------------------------------------------------------------------
    def heartbeat(self, info: WorkerInfo, ttl_s: int = 15) -> None:
        self.r.set(P + "worker:" + info.queue + ":" + info.hostname, info.model_dump_json(), ex=ttl_s)

    def workers(self) -> list[WorkerInfo]:
        keys = list(self.r.scan_iter(P + "worker:*", count=1000))
        raws = self.r.mget(keys) if keys else []
        return [WorkerInfo.model_validate_json(r) for r in raws if r]

    def queue_depth(self, queue: str) -> int:
        return int(self.r.llen(queue))

    def idempotent_lookup(self, key: str) -> str | None:
        raw = self.r.get(P + "idem:" + key)
        return raw.decode() if raw else None
