"""Reading a tenant's own jobs: another tenant's job is as unknown as a job that never existed.

A job whose stored record no longer reads as a job is answered for as what can still be read of it
(`BrokenJob`: failed, `internal_error` / `record_unreadable`), never with a 500; one whose owner cannot be
read is nobody's.
"""

from __future__ import annotations

from evalsvc.api.problems import ProblemError
from evalsvc.records.batches import BatchStore
from evalsvc.records.documents import BrokenJob, Job, JobKind
from evalsvc.records.jobs import JobStore


def not_found(what: str, ident: str) -> ProblemError:
    return ProblemError(404, "not_found", f"no {what} {ident!r}")


def owned_job(jobs: JobStore, job_id: str, kind: JobKind, tenant: str) -> Job | BrokenJob:
    job = jobs.read_job(job_id)
    if job is None or job.kind is not kind or job.tenant != tenant:
        raise not_found(kind.value + " job", job_id)
    return job


def owned_batch(batches: BatchStore, jobs: JobStore, batch_id: str, tenant: str) -> list[Job | BrokenJob]:
    """The batch's jobs in submission order (404 when the batch or any of its jobs is not the caller's; an
    item whose owner cannot be read counts as the caller's when the other items are)."""
    ids = batches.get_batch(batch_id)
    found = jobs.get_jobs(ids) if ids else []
    owners = {j.tenant for j in found if j is not None and j.tenant is not None}
    if not ids or any(j is None for j in found) or owners != {tenant}:
        raise not_found("batch", batch_id)
    return [j for j in found if j is not None]
