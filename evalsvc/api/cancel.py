"""Cancelling from the gateway: one evaluation, or every unfinished item of a batch (the routes' shared part).

A running evaluation is not interrupted on its worker (stopping a judge mid-measurement would need a
channel into the device worker, and the device is freed soon anyway): it is answered `cancelled` at once
and the worker's later result is refused by the once-only write, so the reward is never given.
"""

from __future__ import annotations

from evalsvc.api.metrics import Metrics
from evalsvc.api.problems import ProblemError
from evalsvc.records.cancellation import Cancellation, Canceller, Outcome
from evalsvc.records.documents import BrokenJob, Job


def message(where: str) -> str:
    return f"cancelled by its tenant ({where}) before it ended: no verdict, no reward"


def cancel_job(canceller: Canceller, metrics: Metrics, job: Job | BrokenJob, where: str) -> Cancellation:
    """Cancel one job already known to be the caller's; counted when this call cancelled it."""
    got = canceller.cancel(job.id, message(where))
    if got.outcome is Outcome.CANCELLED and got.was is not None:
        metrics.cancelled(got.was.value)
    return got


def finished_problem(job_id: str, got: Cancellation) -> ProblemError:
    """409: the evaluation ended (a verdict, or our own error) before it could be cancelled."""
    result = got.job.result if got.job is not None else None
    status = result.status.value if result is not None else "internal_error"
    reward = f", reward {result.reward:g}" if result is not None and result.reward is not None else ""
    return ProblemError(
        409,
        "already_finished",
        f"evaluation {job_id!r} had already ended ({status}{reward}); a finished evaluation is not cancelled",
        result_status=status,
    )
