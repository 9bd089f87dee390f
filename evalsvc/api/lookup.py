"""Reading a tenant's own jobs: another tenant's job is as unknown as a job that never existed."""

from __future__ import annotations

from evalsvc.api.problems import ProblemError
from evalsvc.service.records import Job, JobKind
from evalsvc.service.state import JobStore


def not_found(what: str, ident: str) -> ProblemError:
    return ProblemError(404, "not_found", f"no {what} {ident!r}")


def owned_job(store: JobStore, job_id: str, kind: JobKind, tenant: str) -> Job:
    job = store.get_job(job_id)
    if job is None or job.kind is not kind or job.tenant != tenant:
        raise not_found(kind.value + " job", job_id)
    return job


def owned_batch(store: JobStore, batch_id: str, tenant: str) -> list[Job]:
    """The batch's jobs in submission order (404 when the batch or any of its jobs is not the caller's)."""
    ids = store.get_batch(batch_id)
    jobs = store.get_jobs(ids) if ids else []
    if not ids or any(j is None or j.tenant != tenant for j in jobs):
        raise not_found("batch", batch_id)
    return [j for j in jobs if j is not None]
