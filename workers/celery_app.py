"""The workers' Celery application, configured by `evalsvc.queues.make_celery`, the contract both sides use.

Celery carries only job ids; state and results live in Redis through `evalsvc.records`. The worker's process
hooks live here too: JSON logs, this process's metrics, and the metrics exporter of the worker's main
process (docs/observability.md).
"""

from __future__ import annotations

import logging
from functools import cache
from typing import Any

from celery.signals import setup_logging, worker_init, worker_process_shutdown
from prometheus_client.multiprocess import mark_process_dead

from evalsvc.observability.exporter import exposition_registry, start_exporter, worker_collectors
from evalsvc.observability.logs import setup_logging as configure_logging
from evalsvc.observability.metrics import WorkerMetrics
from evalsvc.queues import COMPILE_QUEUE, make_celery
from evalsvc.settings import Settings

SETTINGS = Settings()

log = logging.getLogger("evalsvc.worker")


app = make_celery(SETTINGS, include=("workers.tasks",))


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
