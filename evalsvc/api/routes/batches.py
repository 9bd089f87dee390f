"""/v1/batches: many evaluations in one request, read back in submission order (an RL trainer's view)."""

from __future__ import annotations

from collections import Counter

from fastapi import APIRouter, Depends, Request, Response

from evalsvc.api.cancel import cancel_job
from evalsvc.api.deps import (
    BatchesDep,
    CancellerDep,
    EnqueuerDep,
    IdempotencyDep,
    IdempotencyKey,
    JobIdPath,
    JobsDep,
    MetricsDep,
    PrincipalDep,
    SettingsDep,
    TasksDep,
    WaitQuery,
    WorkersDep,
    current_principal,
)
from evalsvc.api.limits import admit
from evalsvc.api.links import follow
from evalsvc.api.lookup import owned_batch
from evalsvc.api.polling import poll_until
from evalsvc.api.problems import ProblemError, problem_responses
from evalsvc.api.routes.devices import refuse_unserved_classes
from evalsvc.api.submit import (
    enqueue_new,
    evaluation_job,
    job_fingerprint,
    key_reused,
    referenced_tasks,
    refuse_task_code,
    request_fingerprint,
    resolve_task,
    scoped_key,
    store_jobs,
)
from evalsvc.api.views import batch_view
from evalsvc.records.batches import BatchStore
from evalsvc.records.cancellation import Outcome, ended_outcome
from evalsvc.records.documents import (
    BatchCancellation,
    BatchRequest,
    BatchView,
    BrokenJob,
    EvaluationRequest,
    Job,
    State,
)
from evalsvc.records.idempotency import IdempotencyKeys
from evalsvc.records.jobs import JobStore
from evalsvc.records.tasks import TaskStore

router = APIRouter(prefix="/v1/batches", tags=["batches"], dependencies=[Depends(current_principal)])


@router.post(
    "",
    name="submit_batch",
    status_code=202,
    response_model=BatchView,
    responses={202: follow("get_batch", "batch_id"), **problem_responses(400, 401, 403, 413, 422, 429, 503)},
)
def submit_batch(
    body: BatchRequest,
    principal: PrincipalDep,
    jobs: JobsDep,
    tasks: TasksDep,
    batches: BatchesDep,
    workers: WorkersDep,
    idempotency: IdempotencyDep,
    enqueuer: EnqueuerDep,
    settings: SettingsDep,
    metrics: MetricsDep,
    response: Response,
    idempotency_key: IdempotencyKey = None,
) -> BatchView:
    """Queue up to `max_batch` evaluations; items keep submission order, duplicates share one job."""
    n = len(body.evaluations)
    if n > settings.max_batch:
        raise ProblemError(413, "batch_too_large", f"{n} evaluations; at most {settings.max_batch} per batch")
    tenant = principal.tenant
    key = scoped_key(tenant, "batch", idempotency_key)
    fps = [request_fingerprint(tenant, r) for r in body.evaluations]
    earlier = _replayed(idempotency, batches, jobs, key, fps, tenant)
    if earlier is not None:
        jobs.durable()  # the first answer may have been a 503 with everything written but not replicated
        return earlier
    refuse_task_code(principal, settings.task_authors, body.evaluations)
    refuse_unserved_classes(workers, settings, body.evaluations, batch=True)
    missing = admit(jobs, settings, tenant, n, referenced_tasks(body.evaluations), principal.owner)
    task_ids = _resolve_all(tasks, body.evaluations, missing, principal.owner)
    items = [
        # a retried batch finds the jobs it already made by the item keys
        (evaluation_job(tenant, req, task_id), fp, f"{key}#{i}" if key else None)
        for i, (req, task_id, fp) in enumerate(zip(body.evaluations, task_ids, fps, strict=True))
    ]
    stored = store_jobs(jobs, items)
    members: list[Job | BrokenJob] = [job for job, _ in stored]
    for _, existed in stored:
        metrics.submitted("batch_item", existed, tenant)
    enqueue_new(jobs, enqueuer, [job for job, existed in stored if not existed])
    batch_id, existed = batches.create_batch([j.id for j in members], idempotency_key=key)
    if existed:  # a concurrent request with the same key won the race; answer with its batch
        members = owned_batch(batches, jobs, batch_id, tenant)
    jobs.durable()  # acknowledged only once a replica holds it (a failover cannot take it)
    response.headers["Location"] = f"/v1/batches/{batch_id}"
    return batch_view(batch_id, members)


@router.get(
    "/{batch_id}",
    name="get_batch",
    response_model=BatchView,
    responses=problem_responses(401, 404, 422, 429, 503),
)
async def get_batch(
    batch_id: JobIdPath,
    principal: PrincipalDep,
    jobs: JobsDep,
    batches: BatchesDep,
    settings: SettingsDep,
    request: Request,
    wait: WaitQuery = 0,
) -> BatchView:
    """States and rewards in submission order; `?wait=N` returns when all are done or N s passed."""

    def fetch() -> list[Job | BrokenJob]:
        return owned_batch(batches, jobs, batch_id, principal.tenant)

    members = await poll_until(fetch, _all_done, min(wait, settings.max_wait_s), request)
    return batch_view(batch_id, members)


@router.delete(
    "/{batch_id}",
    name="cancel_batch",
    response_model=BatchCancellation,
    responses=problem_responses(401, 404, 422, 429, 503),
)
def cancel_batch(
    batch_id: JobIdPath,
    principal: PrincipalDep,
    jobs: JobsDep,
    batches: BatchesDep,
    canceller: CancellerDep,
    metrics: MetricsDep,
) -> BatchCancellation:
    """Cancel every unfinished item (each as `DELETE /v1/evaluations/{id}` would); finished items keep their
    results. Always 200 with counts; again on a cancelled batch: nothing more is cancelled."""
    members = owned_batch(batches, jobs, batch_id, principal.tenant)
    outcomes: dict[str, Outcome] = {}
    for job in members:
        if job.id in outcomes:  # items that share one job (duplicates) are one cancellation
            continue
        if job.state is State.DONE:
            outcomes[job.id] = ended_outcome(job)
        else:
            outcomes[job.id] = cancel_job(canceller, metrics, job, "DELETE /v1/batches").outcome
    counts = Counter(outcomes[j.id] for j in members)
    return BatchCancellation(
        id=batch_id,
        total=len(members),
        cancelled=counts[Outcome.CANCELLED],
        already_cancelled=counts[Outcome.ALREADY_CANCELLED],
        finished=counts[Outcome.FINISHED] + counts[Outcome.GONE],
        batch=batch_view(batch_id, owned_batch(batches, jobs, batch_id, principal.tenant)),
    )


def _all_done(jobs: list[Job | BrokenJob]) -> bool:
    return all(j.state is State.DONE for j in jobs)


def _resolve_all(
    tasks: TaskStore, requests: list[EvaluationRequest], missing: set[str], owner: str | None
) -> list[str]:
    """Task ids for every item (each distinct task checked once); the first bad item is named."""
    seen: dict[str, str] = {}
    out = []
    for i, req in enumerate(requests):
        ref = req.task.id if req.task is not None else f"id:{req.task_id}"
        if ref not in seen:
            seen[ref] = resolve_task(tasks, req, missing, owner, where=f"evaluations[{i}].task_id")
        out.append(seen[ref])
    return out


def _replayed(
    idempotency: IdempotencyKeys,
    batches: BatchStore,
    jobs: JobStore,
    key: str | None,
    fps: list[str],
    tenant: str,
) -> BatchView | None:
    """The batch an earlier POST with this Idempotency-Key created, checked to be the same request."""
    batch_id = idempotency.lookup(key) if key else None
    if batch_id is None:
        return None
    members = owned_batch(batches, jobs, batch_id, tenant)
    # an item whose record cannot be read any more (failed, see lookup) cannot be compared: it is not held
    # against the request
    if len(members) != len(fps) or any(
        isinstance(j, Job) and job_fingerprint(j) != fp for j, fp in zip(members, fps, strict=True)
    ):
        raise key_reused()
    return batch_view(batch_id, members)
