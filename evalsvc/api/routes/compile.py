"""/v1/compile: build a solution without running it, for agents (a cache hit answers in about a second)."""

from __future__ import annotations

from typing import Annotated

from anyio import to_thread
from fastapi import APIRouter, Depends, Request, Response

from evalsvc.api.deps import (
    EnqueuerDep,
    IdempotencyDep,
    IdempotencyKey,
    JobIdPath,
    JobsDep,
    MetricsDep,
    PrincipalDep,
    SettingsDep,
    current_principal,
    wait_query,
)
from evalsvc.api.limits import admit
from evalsvc.api.links import follow
from evalsvc.api.lookup import owned_job
from evalsvc.api.metrics import Metrics
from evalsvc.api.polling import poll_until
from evalsvc.api.problems import problem_responses
from evalsvc.api.submit import compile_fingerprint, new_job, replayed, scoped_key, submit
from evalsvc.api.views import compile_view
from evalsvc.queues import Enqueuer
from evalsvc.records.documents import BrokenJob, CompileRequest, CompileView, Job, JobKind, State
from evalsvc.records.idempotency import IdempotencyKeys
from evalsvc.records.jobs import JobStore
from evalsvc.settings import Settings

router = APIRouter(prefix="/v1/compile", tags=["compile"], dependencies=[Depends(current_principal)])

DEFAULT_WAIT_S = 120.0


@router.post(
    "",
    name="compile_solution",
    response_model=CompileView,
    responses={
        200: follow("get_compile", "compile_id"),
        202: {
            "model": CompileView,
            "description": "Still compiling: poll GET /v1/compile/{id}.",
            **follow("get_compile", "compile_id"),
        },
        **problem_responses(400, 401, 413, 422, 429, 503),
    },
)
async def compile_solution(
    body: CompileRequest,
    principal: PrincipalDep,
    jobs: JobsDep,
    idempotency: IdempotencyDep,
    enqueuer: EnqueuerDep,
    settings: SettingsDep,
    metrics: MetricsDep,
    request: Request,
    response: Response,
    idempotency_key: IdempotencyKey = None,
    wait: Annotated[float, wait_query(DEFAULT_WAIT_S)] = DEFAULT_WAIT_S,
) -> CompileView:
    """Queue a compile job and wait for its report: 200 when done, 202 when still running."""
    tenant = principal.tenant

    def create() -> Job:
        return _create(idempotency, jobs, enqueuer, settings, metrics, tenant, body, idempotency_key)

    def fetch() -> Job | BrokenJob:
        return owned_job(jobs, created.id, JobKind.COMPILE, tenant)

    created = await to_thread.run_sync(create)
    job = await poll_until(fetch, _done, min(wait, settings.max_wait_s), request)
    response.status_code = 200 if _done(job) else 202
    response.headers["Location"] = f"/v1/compile/{job.id}"
    return compile_view(job)


@router.get(
    "/{compile_id}",
    name="get_compile",
    response_model=CompileView,
    responses=problem_responses(401, 404, 422, 429, 503),
)
async def get_compile(
    compile_id: JobIdPath,
    principal: PrincipalDep,
    jobs: JobsDep,
    settings: SettingsDep,
    request: Request,
    wait: Annotated[float, wait_query(0)] = 0,
) -> CompileView:
    """The compile job and its report once done; `?wait=N` long-polls."""

    def fetch() -> Job | BrokenJob:
        return owned_job(jobs, compile_id, JobKind.COMPILE, principal.tenant)

    return compile_view(await poll_until(fetch, _done, min(wait, settings.max_wait_s), request))


def _done(job: Job | BrokenJob) -> bool:
    return job.state is State.DONE


def _create(
    idempotency: IdempotencyKeys,
    jobs: JobStore,
    enqueuer: Enqueuer,
    settings: Settings,
    metrics: Metrics,
    tenant: str,
    body: CompileRequest,
    idempotency_key: str | None,
) -> Job:
    key = scoped_key(tenant, "compile", idempotency_key)
    fp = compile_fingerprint(tenant, body.solution)
    job = replayed(idempotency, jobs, key, fp)
    if job is None:
        admit(jobs, settings, tenant, 1)
        job, existed = submit(jobs, enqueuer, new_job(JobKind.COMPILE, tenant, body.solution), fp, key)
        metrics.submitted("compile", existed, tenant)
    jobs.durable()  # acknowledged only once a replica holds it (a replay too: it may be unreplicated yet)
    return job
