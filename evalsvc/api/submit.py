"""Turning accepted requests into jobs: task resolution, dedup and idempotency keys, create, enqueue.

Shared by the evaluation, batch and compile routes so that all three dedup and refuse alike.
"""

from __future__ import annotations

import logging
import time

import redis

from evalsvc.api.auth import Principal, may_author_tasks
from evalsvc.api.problems import ProblemError
from evalsvc.core.hashing import content_hash
from evalsvc.core.options import EvalOptions
from evalsvc.core.outcomes import failure
from evalsvc.core.results import Status
from evalsvc.core.solutions import Solution
from evalsvc.core.tasks import InvalidTask, TaskSpec
from evalsvc.queues import Enqueuer
from evalsvc.records.documents import BrokenJob, EvaluationRequest, Job, JobKind, State
from evalsvc.records.idempotency import IdempotencyKeys
from evalsvc.records.jobs import JobStore
from evalsvc.records.keys import new_id
from evalsvc.records.tasks import TaskStore

log = logging.getLogger("evalsvc.api")


def scoped_key(tenant: str, scope: str, key: str | None) -> str | None:
    """An Idempotency-Key of one tenant for one kind of POST; hashed, so any header text is a safe key."""
    return content_hash("idempotency", tenant, scope, key, length=32) if key else None


def fingerprint(
    kind: JobKind,
    tenant: str,
    task_id: str | None,
    solution: Solution,
    options: EvalOptions,
    device_class: str,
) -> str:
    """The dedup key: identical work of one tenant is done once (tenants never see each other's jobs).

    The device class is part of it: the same kernel timed on another GPU class is another measurement.
    """
    opts = options.model_dump(mode="json")
    return content_hash(kind.value, tenant, task_id, solution.id, opts, device_class, length=32)


def job_fingerprint(job: Job) -> str:
    return fingerprint(job.kind, job.tenant, job.task_id, job.solution, job.options, job.device_class)


def request_fingerprint(tenant: str, req: EvaluationRequest) -> str:
    task_id = req.task_id if req.task is None else req.task.id
    return fingerprint(JobKind.EVALUATE, tenant, task_id, req.solution, req.options, req.device_class)


def compile_fingerprint(tenant: str, solution: Solution) -> str:
    return fingerprint(JobKind.COMPILE, tenant, None, solution, EvalOptions(), "default")


def register_task(tasks: TaskStore, spec: TaskSpec, owner: str | None) -> tuple[str, bool]:
    """Check what can be checked without running the module (422), then store it by content hash in
    `owner`'s namespace (None: the shared one). True when it is new to `owner`."""
    try:
        spec.check_syntax()
    except InvalidTask as e:
        raise ProblemError(422, "invalid_task", str(e)) from None
    return tasks.put_task(spec, owner)


def referenced_tasks(requests: list[EvaluationRequest]) -> list[str]:
    """The task ids the requests name (not their inline tasks), each once."""
    return list(dict.fromkeys(r.task_id for r in requests if r.task is None and r.task_id is not None))


def refuse_task_code(
    principal: Principal, authors: list[str] | None, requests: list[EvaluationRequest]
) -> None:
    """A task is code the service runs (isolated, in a process of its own): from a tenant the operator does
    not let author tasks (`task_authors`), a registration or an inline task is refused before anything is
    stored."""
    if any(r.task is not None for r in requests):
        require_task_author(principal, authors)


def require_task_author(principal: Principal, authors: list[str] | None) -> None:
    if not may_author_tasks(principal, authors):
        raise ProblemError(
            403,
            "task_authoring_forbidden",
            f"tenant {principal.tenant!r} may not register tasks or send them inline on this service; "
            "evaluate against a shared task by its id (GET /v1/tasks)",
        )


def resolve_task(
    tasks: TaskStore, req: EvaluationRequest, missing: set[str], owner: str | None, where: str = "task_id"
) -> str:
    """The id of the request's task; inline tasks are registered first (in `owner`'s namespace), unknown
    ids (`missing`, as `admit` found them: not stored, or another tenant's) are a 422."""
    if req.task is not None:
        return register_task(tasks, req.task, owner)[0]
    assert req.task_id is not None
    if req.task_id in missing:
        raise ProblemError(422, "unknown_task", f"{where}: no task {req.task_id!r}; POST /v1/tasks first")
    return req.task_id


def new_job(kind: JobKind, tenant: str, solution: Solution, **fields: object) -> Job:
    now = time.time()
    prefix = "e" if kind is JobKind.EVALUATE else "c"
    return Job(
        id=new_id(prefix),
        kind=kind,
        state=State.QUEUED,
        solution=solution,
        tenant=tenant,
        created_at=now,
        updated_at=now,
        **fields,
    )


def evaluation_job(tenant: str, req: EvaluationRequest, task_id: str) -> Job:
    return new_job(
        JobKind.EVALUATE,
        tenant,
        req.solution,
        task_id=task_id,
        options=req.options,
        device_class=req.device_class,
    )


def submit(
    jobs: JobStore, enqueuer: Enqueuer, job: Job, dedup_key: str, idempotency_key: str | None
) -> tuple[Job, bool]:
    """Store the job (or find the one it duplicates) and queue it when new. True when it existed."""
    stored, existed = store_job(jobs, job, dedup_key, idempotency_key)
    if not existed:
        enqueue_new(jobs, enqueuer, [stored])
    return stored, existed


def store_job(jobs: JobStore, job: Job, dedup_key: str, idempotency_key: str | None) -> tuple[Job, bool]:
    """Store the job, or find the one it duplicates (True); not queued yet."""
    return store_jobs(jobs, [(job, dedup_key, idempotency_key)])[0]


def store_jobs(jobs: JobStore, items: list[tuple[Job, str, str | None]]) -> list[tuple[Job, bool]]:
    """`store_job` for many (job, dedup key, idempotency key) in one round trip."""
    stored = jobs.create_jobs(list(items))
    for (_, dedup_key, _), (job, existed) in zip(items, stored, strict=True):
        if existed and job_fingerprint(job) != dedup_key:  # found by its Idempotency-Key, not its content
            raise key_reused()
    return stored


def enqueue_new(store: JobStore, enqueuer: Enqueuer, jobs: list[Job]) -> None:
    """Queue freshly stored jobs; if the transport fails, none of them may hold quota forever."""
    try:
        if len(jobs) == 1:
            enqueuer.enqueue(jobs[0].id)
        elif jobs:
            enqueuer.enqueue_many([j.id for j in jobs])
    except Exception:  # whatever the transport raised
        for job in jobs:
            _abandon(store, job)
        raise
    store.mark_queued(*(job.id for job in jobs))  # were the gateway to die before this, the sweep queues them


def _abandon(store: JobStore, job: Job) -> None:
    """A job that could not be queued ends as our own error: freed from quota, never served by dedup."""
    msg = "the job could not be queued; submit it again"
    try:
        store.finish(job, failure(Status.INTERNAL_ERROR, msg, job.options))
        store.mark_queued(job.id)
    except redis.RedisError:
        log.error("job %s was stored but neither queued nor finished", job.id)


def replayed(
    idempotency: IdempotencyKeys, jobs: JobStore, idempotency_key: str | None, fingerprint_: str
) -> Job | None:
    """The job an earlier POST with this Idempotency-Key created, checked to be the same request."""
    if idempotency_key is None:
        return None
    job_id = idempotency.lookup(idempotency_key)
    job = jobs.read_job(job_id) if job_id else None
    if job is None or isinstance(job, BrokenJob):  # unreadable, hence failed now: the key makes a fresh job
        return None
    if job_fingerprint(job) != fingerprint_:
        raise key_reused()
    return job


def key_reused() -> ProblemError:
    msg = "this Idempotency-Key was used for a different request; use a fresh key"
    return ProblemError(422, "idempotency_key_reused", msg)
