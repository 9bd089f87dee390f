"""The queue contract between the gateway and the workers: queue and task names, how a job id is handed
over (`Enqueuer`), and the Celery application's configuration. Both sides import it; `evalsvc` never
imports `workers` (the task bodies), and messages name their task, so the sender needs no task object."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from celery import Celery

    from evalsvc.settings import Settings

COMPILE_QUEUE = "compile"

COMPILE_TASK = "evalsvc.compile"
ROUTE_TASK = "evalsvc.route"
EVALUATE_TASK = "evalsvc.evaluate"
PROFILE_TASK = "evalsvc.profile_task"
VET_TASK = "evalsvc.vet"


class QueueUnavailable(Exception):
    """The broker refused or could not be reached (a 503 `queue_unavailable`, not `store_unavailable`)."""


class Enqueuer(Protocol):
    def enqueue(self, job_id: str) -> None:
        """Queue the job for its compile stage (which routes evaluations to a GPU queue itself)."""

    def enqueue_profile(self, task_id: str, device_class: str, queue: str) -> None:
        """Queue a reference profile straight to one GPU worker's queue (nothing to compile)."""

    def enqueue_many(self, job_ids: list[str]) -> None:
        """Queue several jobs, in order (a batch): one connection for all of them."""

    def close(self) -> None: ...


def make_celery(settings: Settings, include: tuple[str, ...] = ()) -> Celery:
    """The Celery application both sides configure alike: Redis broker (one Redis, or the primary through
    Sentinel), late acks, prefetch 1, bounded redelivery. The workers pass their task module in `include`;
    the gateway and the CLI, nothing. No result backend: results are records (`evalsvc.records`)."""
    from celery import Celery

    from evalsvc.redis_clients import celery_broker

    broker, transport_options = celery_broker(settings)
    app = Celery("evalsvc", broker=broker, include=list(include))
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue=COMPILE_QUEUE,
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        broker_connection_retry_on_startup=True,
        broker_transport_options={**redelivery_options(settings.redelivery_after_s), **transport_options},
        worker_hijack_root_logger=False,
        # A prefork child can be killed when the broker connection drops; a GPU worker's thread cannot:
        # its evaluations run to the end and write their results (Redis retries ride out a restart), and
        # their messages, never acked, come back and find the jobs done. Cancelling them made Celery
        # crash the worker (NotImplementedError from the threads pool, in test_redis_restart_during_a_batch).
        worker_cancel_long_running_tasks_on_connection_loss=settings.worker_kind != "gpu",
    )
    return app


def redelivery_options(after_s: int) -> dict[str, int]:
    """Kombu's Redis transport puts an unacked message back once it is `visibility_timeout` old, but
    only scans for such messages every interval x throttle seconds (10 x 10 by default): scan every
    tenth of the timeout (1 to 10 s) so a dead worker's job is redelivered close to `after_s`."""
    return {
        "visibility_timeout": after_s,
        "unacked_restore_interval": max(1, min(10, after_s // 10)),
        "unacked_restore_throttle": 1,
    }
