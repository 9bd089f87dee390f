"""The Celery application: Redis broker, late acks, prefetch 1, bounded redelivery.

Celery carries only job ids; state and results live in Redis through `JobStore`. The worker's process
hooks live here too: JSON logs, this process's metrics, and the metrics exporter of the worker's main
process (docs/observability.md).
"""

from __future__ import annotations

import logging
from functools import cache
from typing import Any

from celery import Celery
from celery.signals import setup_logging, worker_init, worker_process_shutdown
from prometheus_client.multiprocess import mark_process_dead

from evalsvc.observability.exporter import exposition_registry, start_exporter, worker_collectors
from evalsvc.observability.logs import setup_logging as configure_logging
from evalsvc.observability.metrics import WorkerMetrics
from evalsvc.settings import Settings

COMPILE_QUEUE = "compile"
SETTINGS = Settings()

log = logging.getLogger("evalsvc.worker")


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
        broker_transport_options=redelivery_options(settings.redelivery_after_s),
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


app = make_celery(SETTINGS)


@cache
def worker_metrics() -> WorkerMetrics:
    """This process's metrics. Made in the main process at start (so known series exist before the
    first job); prometheus-client moves a forked child's values to that child's own files."""
    return WorkerMetrics(SETTINGS.worker_kind, SETTINGS.worker_name or SETTINGS.worker_kind)


def _gpu_label(settings: Settings) -> str | None:
    if settings.worker_kind != "gpu":
        return None
    return settings.gpu_uuid or settings.device


@setup_logging.connect
def _setup_logging(**_: Any) -> None:
    """A receiver here tells Celery not to configure logging itself: one JSON line per event instead."""
    configure_logging(
        SETTINGS.log_format, SETTINGS.log_level, worker=SETTINGS.worker_name, gpu=_gpu_label(SETTINGS)
    )


@worker_init.connect
def _start_exporter(**_: Any) -> None:
    """Serve this worker group's metrics from its main process, before the pool forks."""
    if SETTINGS.metrics_port is None:
        return
    multiproc = SETTINGS.prometheus_multiproc_dir
    if multiproc is None and SETTINGS.worker_kind == "compile":  # a prefork pool: jobs run in children
        log.warning("PROMETHEUS_MULTIPROC_DIR is not set: the pool's child processes' metrics are not served")
    if multiproc is not None:
        multiproc.mkdir(parents=True, exist_ok=True)
    metrics = worker_metrics()
    start_exporter(
        SETTINGS, exposition_registry(multiproc, metrics.registry, worker_collectors(SETTINGS, COMPILE_QUEUE))
    )


@worker_process_shutdown.connect
def _process_gone(pid: int | None = None, **_: Any) -> None:
    """A pool child that exits cleanly drops its live gauges (the exporter reaps killed ones)."""
    if SETTINGS.prometheus_multiproc_dir is not None and pid is not None:
        mark_process_dead(pid, str(SETTINGS.prometheus_multiproc_dir))
