"""/v1/evaluations: one solution against one task, queued; read back (and long-poll) by id."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import PlainTextResponse

from evalsvc.api.cancel import cancel_job, finished_problem
from evalsvc.api.deps import (
    CancellerDep,
    EnqueuerDep,
    FormatQuery,
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
from evalsvc.api.lookup import not_found, owned_job
from evalsvc.api.polling import poll_until
from evalsvc.api.problems import problem_responses
from evalsvc.api.routes.devices import refuse_unserved_classes
from evalsvc.api.submit import (
    evaluation_job,
    referenced_tasks,
    refuse_task_code,
    replayed,
    request_fingerprint,
    resolve_task,
    scoped_key,
    submit,
)
from evalsvc.records.cancellation import Outcome
from evalsvc.records.documents import BrokenJob, EvaluationRequest, EvaluationView, Job, JobKind, State
from evalsvc.render import render_result

router = APIRouter(prefix="/v1/evaluations", tags=["evaluations"], dependencies=[Depends(current_principal)])


@router.post(
    "",
    name="submit_evaluation",
    status_code=202,
    response_model=EvaluationView,
    responses={
        202: follow("get_evaluation", "evaluation_id"),
        **problem_responses(400, 401, 403, 413, 422, 429, 503),
    },
)
def submit_evaluation(
    body: EvaluationRequest,
    principal: PrincipalDep,
    jobs: JobsDep,
    tasks: TasksDep,
    workers: WorkersDep,
    idempotency: IdempotencyDep,
    enqueuer: EnqueuerDep,
    settings: SettingsDep,
    metrics: MetricsDep,
    response: Response,
    idempotency_key: IdempotencyKey = None,
) -> EvaluationView:
    """Queue an evaluation. Identical work of the same tenant is served by one job (`deduplicated`)."""
    tenant = principal.tenant
    key = scoped_key(tenant, "evaluation", idempotency_key)
    fp = request_fingerprint(tenant, body)
    job = replayed(idempotency, jobs, key, fp)
    existed = False  # a replay answers as the original did: about the same job
    if job is None:
        refuse_task_code(principal, settings.task_authors, [body])
        refuse_unserved_classes(workers, settings, [body])
        missing = admit(jobs, settings, tenant, 1, referenced_tasks([body]), principal.owner)
        task_id = resolve_task(tasks, body, missing, principal.owner)
        job, existed = submit(jobs, enqueuer, evaluation_job(tenant, body, task_id), fp, key)
        metrics.submitted("evaluation", existed, tenant)
    jobs.durable()  # acknowledged only once a replica holds it (a replay too: it may be unreplicated yet)
    response.headers["Location"] = f"/v1/evaluations/{job.id}"
    return EvaluationView.of(job, deduplicated=existed)


@router.get(
    "/{evaluation_id}",
    name="get_evaluation",
    response_model=EvaluationView,
    responses={
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "with `format=text`"},
        **problem_responses(401, 404, 422, 429, 503),
    },
)
async def get_evaluation(
    evaluation_id: JobIdPath,
    principal: PrincipalDep,
    jobs: JobsDep,
    settings: SettingsDep,
    request: Request,
    wait: WaitQuery = 0,
    fmt: FormatQuery = "json",
) -> EvaluationView | PlainTextResponse:
    """The evaluation and, once `done`, its result document; `?wait=N` returns as soon as it is done;
    `format=text` gives the compact report (under 2,000 tokens with a profile)."""

    def fetch() -> Job | BrokenJob:
        return owned_job(jobs, evaluation_id, JobKind.EVALUATE, principal.tenant)

    job = await poll_until(fetch, _done, min(wait, settings.max_wait_s), request)
    if fmt == "text":
        body = render_result(job.result) if job.result else f"evaluation {job.id}: {job.state.value}"
        return PlainTextResponse(body + "\n")
    return EvaluationView.of(job)


def _done(job: Job | BrokenJob) -> bool:
    return job.state is State.DONE


@router.delete(
    "/{evaluation_id}",
    name="cancel_evaluation",
    response_model=EvaluationView,
    responses=problem_responses(401, 404, 409, 422, 429, 503),
)
def cancel_evaluation(
    evaluation_id: JobIdPath,
    principal: PrincipalDep,
    jobs: JobsDep,
    canceller: CancellerDep,
    metrics: MetricsDep,
) -> EvaluationView:
    """Cancel an unfinished evaluation: it ends `cancelled` (no reward) at once. Queued, it never runs; one
    compiling or running finishes on its worker and that result is dropped. Idempotent: cancelling it again
    answers 200 with the same document. A finished evaluation answers 409 `already_finished`. An evaluation
    deduplicated into several submissions of the tenant is one job: cancelled for all of them."""
    job = owned_job(jobs, evaluation_id, JobKind.EVALUATE, principal.tenant)
    got = cancel_job(canceller, metrics, job, "DELETE /v1/evaluations")
    if got.outcome is Outcome.GONE:
        raise not_found("evaluate job", evaluation_id)
    if got.outcome is Outcome.FINISHED or got.job is None:
        raise finished_problem(evaluation_id, got)
    return EvaluationView.of(got.job)
