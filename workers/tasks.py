"""Celery task bodies: short, typed hand-offs to the compile stage and the evaluator.

Metrics and log fields are recorded here, around the calls into the worker context, from the job and
its result document as stored; never inside the engine.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

import redis
from celery.exceptions import Reject
from celery.signals import worker_shutdown

from evalsvc.core.outcomes import failure
from evalsvc.core.pools import VetPolicy
from evalsvc.core.results import FailureKind, Status
from evalsvc.observability.gpu_health import resolve_index, timing_readiness
from evalsvc.observability.logs import log_context
from evalsvc.observability.metrics import WorkerMetrics
from evalsvc.queues import COMPILE_TASK, EVALUATE_TASK, PROFILE_TASK, ROUTE_TASK, VET_TASK
from evalsvc.records.documents import Job, JobKind, State
from evalsvc.sandbox.base import SandboxUnavailable
from workers.celery_app import app, worker_metrics
from workers.context import Redeliver, WorkerContext, current_context

log = logging.getLogger("evalsvc.worker")


_CTX_LOCK = threading.Lock()


def _ctx() -> WorkerContext:
    """The process's one context (a GPU worker's threads share it)."""
    with _CTX_LOCK:
        return _context()


@cache
def _context() -> WorkerContext:
    return current_context()


@worker_shutdown.connect
def _close_runners(**_: object) -> None:
    """The spare runner and its scratch directory end with the worker instead of outliving it."""
    if _context.cache_info().currsize and "evaluator" in vars(_ctx()):
        _ctx().evaluator.judge.close()


@cache
def _gpu_index() -> int | None:
    s = _ctx().settings
    return resolve_index(s.gpu_uuid, s.device)


def _start(ctx: WorkerContext, metrics: WorkerMetrics, job_id: str, stage: str) -> Job | None:
    """Load the job and count this delivery of `stage` (`Job.deliveries`, and an attempt); jobs that keep
    killing workers end here, and so do jobs whose stored record cannot be read (failed `record_unreadable`
    by `read_job`) and jobs finished meanwhile, cancelled ones included (not counted as a delivery)."""
    job = ctx.jobs.read_job(job_id)
    if not isinstance(job, Job) or job.state is State.DONE:
        if isinstance(job, Job):  # a cancelled job lands here: it never runs
            status = job.result.status.value if job.result else "compiled"
            log.info("job %s is done already (%s): %s delivery skipped", job_id, status, stage)
        return None
    attempts = ctx.jobs.bump_attempts(job_id, stage)
    if not attempts:
        return None  # done (or gone) since it was read
    job.attempts = attempts
    if attempts > ctx.settings.max_attempts:
        msg = f"the job was interrupted {attempts - 1} times (worker crash or kill); giving up"
        result = failure(Status.INTERNAL_ERROR, msg, job.options, failure=FailureKind.JOB_ABANDONED)
        if ctx.finish(job, result):
            metrics.finished(job)
        return None
    metrics.job_started(job)
    return job


@contextmanager
def _answered(ctx: WorkerContext, job: Job) -> Iterator[None]:
    """An accepted job always gets a terminal result: an error of ours around the engine (the compile
    sandbox's engine unreachable, a bug) ends it with a typed internal error instead of leaving it
    `compiling`/`running` forever once Celery acks the failed task. When even that write fails (Redis
    gone for longer than the worker's Redis retries), the error propagates: the ack fails as well, and
    the message, still in Redis' unacked set, is delivered again after `redelivery_after_s`."""
    try:
        yield
    except SandboxUnavailable as e:
        log.error("compile sandbox unavailable: %s", e)
        kind, msg = FailureKind.SANDBOX_UNAVAILABLE, f"the compile sandbox is unavailable: {e}"
        ctx.finish(job, failure(Status.INTERNAL_ERROR, msg, job.options, failure=kind))
    except (redis.RedisError, Redeliver):
        raise
    except Exception as e:
        log.exception("unexpected error on job %s", job.id)
        msg = f"worker error: {type(e).__name__}: {e}"[:2000]
        ctx.finish(job, failure(Status.INTERNAL_ERROR, msg, job.options, failure=FailureKind.WORKER_ERROR))


def _written_here(ctx: WorkerContext, job: Job) -> bool:
    """Whether this attempt wrote the job's terminal result: the stored document is the one finished
    here (a redelivered twin that finished first wrote its own), so each result is counted once."""
    if job.state is not State.DONE:
        return False
    stored = ctx.jobs.read_job(job.id)
    return isinstance(stored, Job) and stored.state is State.DONE and stored.updated_at == job.updated_at


def _check_gpu(ctx: WorkerContext, metrics: WorkerMetrics) -> None:
    """Say when timings start on a throttled or hot GPU (the judge's timing policy decides what to do)."""
    index = _gpu_index()
    if index is None:
        return
    ready, why = timing_readiness(index, ctx.settings.gpu_max_temp_c)
    if not ready:
        metrics.gpu_not_ready.inc()
        log.warning("GPU %d is not ready for timing: %s", index, why)


@app.task(name=COMPILE_TASK, acks_late=True, reject_on_worker_lost=True)
def compile_job(job_id: str) -> None:
    ctx, metrics = _ctx(), worker_metrics()
    with log_context(evaluation_id=job_id, stage="compile"):
        job = _start(ctx, metrics, job_id, "compile")
        if job is None:
            return
        with log_context(task_id=job.task_id), metrics.in_flight(), _answered(ctx, job):
            ctx.jobs.advance(job, State.COMPILING)
            ctx.compile_and_route(job)
        metrics.compiled(job.compile_report)
        if _written_here(ctx, job):
            metrics.finished(job)
            log.info("finished at compile: %s", job.result.status if job.result else "compiled")


@app.task(name=ROUTE_TASK, acks_late=True, reject_on_worker_lost=True)
def route_job(job_id: str, deadline: float, parked_at: float) -> None:
    """Look again for a live GPU worker for a compiled job parked by `WorkerContext.route` (milliseconds
    of a compile slot, not `route_wait_s`). Not an attempt: nothing of the job runs here. A message whose
    park is not the job's last save (a duplicate, or the job moved on) ends without doing anything."""
    ctx, metrics = _ctx(), worker_metrics()
    with log_context(evaluation_id=job_id, stage="route"):
        job = ctx.jobs.read_job(job_id)
        if not isinstance(job, Job) or job.state is not State.COMPILING or job.updated_at != parked_at:
            return
        with log_context(task_id=job.task_id), _answered(ctx, job):
            ctx.route(job, deadline, recheck=True)
        if _written_here(ctx, job):
            metrics.finished(job)
            log.info("finished at routing: %s", job.result.status if job.result else None)


@app.task(name=EVALUATE_TASK, acks_late=True, reject_on_worker_lost=True)
def evaluate_job(job_id: str) -> None:
    ctx, metrics = _ctx(), worker_metrics()
    with log_context(evaluation_id=job_id, stage="evaluate"):
        job = _start(ctx, metrics, job_id, "evaluate")
        if job is None:
            return
        if job.kind is not JobKind.EVALUATE:
            return
        _check_gpu(ctx, metrics)
        try:
            with log_context(task_id=job.task_id), metrics.in_flight(), _answered(ctx, job):
                started = time.monotonic()
                ctx.evaluate(job)
                elapsed = time.monotonic() - started
        except Redeliver:
            raise Reject("the runner did not start", requeue=True) from None
        metrics.observe("evaluate", elapsed)
        status = job.result.status if job.result else None
        log.info("evaluated %s in %.2fs: %s", job_id, elapsed, status)
        if _written_here(ctx, job):
            metrics.finished(job)


@app.task(name=PROFILE_TASK, acks_late=True, reject_on_worker_lost=True)
def profile_task(task_id: str, device_class: str) -> None:
    """A task's reference profile on this GPU worker (queued straight here by the gateway)."""
    ctx, metrics = _ctx(), worker_metrics()
    with log_context(task_id=task_id, stage="profile"), metrics.in_flight():
        started = time.monotonic()
        ctx.profile_task(task_id, device_class)
        metrics.observe("profile", time.monotonic() - started)


@app.task(name=VET_TASK, acks_late=True, reject_on_worker_lost=True)
def vet_job(task_id: str, policy: dict, run: str | None = None) -> None:
    """Vet a registered task on this worker's device (`evalsvc tasks vet` sends these to GPU queues)."""
    ctx = _ctx()
    with log_context(task_id=task_id, stage="vet"):
        record = ctx.vet(task_id, VetPolicy.model_validate(policy), run)
        if record is None:
            log.warning("vet: no task %s", task_id)
        else:
            log.info("vetted %s: %s in %.2fs", task_id, record.status, record.duration_s)
