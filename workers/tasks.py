"""Celery task bodies: short, typed hand-offs to the compile stage and the evaluator."""

from __future__ import annotations

import logging
import time
from functools import cache

from evalsvc.core.outcomes import failure
from evalsvc.core.results import Status
from evalsvc.service.records import Job, JobKind, State
from workers.celery_app import app
from workers.context import WorkerContext, current_context

log = logging.getLogger("evalsvc.worker")


@cache
def _ctx() -> WorkerContext:
    return current_context()


def _start(ctx: WorkerContext, job_id: str) -> Job | None:
    """Load the job and count this attempt; jobs that keep killing workers end here."""
    job = ctx.jobs.get_job(job_id)
    if job is None or job.state is State.DONE:
        return None
    attempts = ctx.jobs.bump_attempts(job_id)
    job.attempts = attempts
    if attempts > ctx.settings.max_attempts:
        msg = f"the job was interrupted {attempts - 1} times (worker crash or kill); giving up"
        ctx.finish(job, failure(Status.INTERNAL_ERROR, msg, job.options))
        return None
    return job


@app.task(name="evalsvc.compile", acks_late=True, reject_on_worker_lost=True)
def compile_job(job_id: str) -> None:
    ctx = _ctx()
    job = _start(ctx, job_id)
    if job is None:
        return
    ctx.jobs.advance(job, State.COMPILING)
    ctx.compile_and_route(job)


@app.task(name="evalsvc.evaluate", acks_late=True, reject_on_worker_lost=True)
def evaluate_job(job_id: str) -> None:
    ctx = _ctx()
    job = _start(ctx, job_id)
    if job is None:
        return
    if job.kind is not JobKind.EVALUATE:
        return
    started = time.monotonic()
    ctx.evaluate(job)
    log.info("evaluated %s in %.2fs", job_id, time.monotonic() - started)
