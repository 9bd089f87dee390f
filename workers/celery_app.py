"""The Celery application: Redis broker, late acks, prefetch 1, bounded redelivery.

Celery carries only job ids; state and results live in Redis through `JobStore`.
"""

from __future__ import annotations

from celery import Celery

from evalsvc.settings import Settings

COMPILE_QUEUE = "compile"


def make_celery(settings: Settings) -> Celery:
    app = Celery("evalsvc", broker=settings.redis_url, include=["workers.tasks"])
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue=COMPILE_QUEUE,
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        broker_connection_retry_on_startup=True,
        broker_transport_options={"visibility_timeout": settings.redelivery_after_s},
        worker_hijack_root_logger=False,
        worker_cancel_long_running_tasks_on_connection_loss=True,
    )
    return app


app = make_celery(Settings())
