"""A worker process group's metrics over HTTP, for Prometheus to scrape.

The worker's main process serves `/metrics` on EVALSVC_METRICS_PORT. With PROMETHEUS_MULTIPROC_DIR set
(one directory per worker process group, emptied when the group starts) it aggregates the files of every
process of the group: the prefork children that run the tasks, dead ones included for counters. Values
that are read at scrape time rather than counted (queue depth and GPU heartbeats from Redis, GPU health
from NVML, which worker and build this is) are collectors of the serving process.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import redis
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector

from evalsvc.observability.build_info import BuildInfoCollector
from evalsvc.observability.gpu_health import GpuHealthCollector
from evalsvc.records.jobs import JobStore
from evalsvc.records.workers import DEVICE_CLASS_MEMORY_S, WorkerRegistry
from evalsvc.redis_clients import scrape_redis
from evalsvc.settings import Settings

log = logging.getLogger("evalsvc.metrics")

_LIVE_FILE = re.compile(r"^gauge_live\w*_(\d+)\.db$")


def reap_dead_processes(path: Path) -> None:
    """Forget the live gauges of processes that died without saying so (a prefork child killed by the
    OOM killer would otherwise count as in flight forever)."""
    pids = {int(m.group(1)) for f in path.glob("gauge_live*.db") if (m := _LIVE_FILE.match(f.name))}
    for pid in pids - {os.getpid()}:
        if not _alive(pid):
            mark_process_dead(pid, str(path))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class MultiProcess(Collector):
    """prometheus-client's multiprocess aggregation, reaping dead processes' live gauges first."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.inner = MultiProcessCollector(None, path=str(path))

    def collect(self) -> Iterable[Metric]:
        reap_dead_processes(self.path)
        return self.inner.collect()


class QueueDepthCollector(Collector):
    """evalsvc_queue_depth{queue}: jobs waiting in each Celery queue, read from Redis at scrape time.

    The queues are `fixed` (the compile queue) and every GPU queue with a live heartbeat."""

    def __init__(self, workers: WorkerRegistry, jobs: JobStore, fixed: Sequence[str]) -> None:
        self.workers = workers
        self.jobs = jobs
        self.fixed = tuple(fixed)

    def describe(self) -> Iterable[Metric]:
        return [self._family()]

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        try:
            queues = set(self.fixed) | {w.queue for w in self.workers.workers() if w.kind == "gpu"}
            for q in sorted(queues):
                family.add_metric([q], float(self.jobs.queue_depth(q)))
        except redis.RedisError as e:
            log.warning("queue depth not read: Redis error %s", e)
            return
        yield family

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily("evalsvc_queue_depth", "jobs waiting in a queue", labels=["queue"])


class HeartbeatCollector(Collector):
    """evalsvc_gpu_heartbeat_age_seconds{device_class}: seconds since any GPU worker of a device class last
    beat, read from Redis at scrape time (classes are remembered for a week, so a class whose every worker
    died stays visible and ages; the gateway refuses its submissions once no beat is live)."""

    def __init__(self, workers: WorkerRegistry) -> None:
        self.workers = workers

    def describe(self) -> Iterable[Metric]:
        return [self._family()]

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        try:
            beats = self.workers.device_classes(DEVICE_CLASS_MEMORY_S)
        except redis.RedisError as e:
            log.warning("GPU heartbeats not read: Redis error %s", e)
            return
        now = time.time()
        for device_class, beat in sorted(beats.items()):
            family.add_metric([device_class], max(0.0, now - beat))
        yield family

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "evalsvc_gpu_heartbeat_age_seconds",
            "seconds since a GPU worker of this device class last beat",
            labels=["device_class"],
        )


class WorkerInfoCollector(Collector):
    """evalsvc_worker_info: which worker serves these metrics (one series per worker, value 1)."""

    def __init__(self, info: dict[str, str]) -> None:
        self.info = info

    def describe(self) -> Iterable[Metric]:
        return [InfoMetricFamily("evalsvc_worker", "the worker behind this endpoint")]

    def collect(self) -> Iterator[Metric]:
        family = InfoMetricFamily("evalsvc_worker", "the worker behind this endpoint")
        family.add_metric([], self.info)
        yield family


def worker_collectors(settings: Settings, compile_queue: str) -> list[Collector]:
    """The scrape-time collectors a worker of this kind serves."""
    info = {
        "worker": settings.worker_name or "",
        "worker_kind": settings.worker_kind,
        "device": settings.device,
        "device_class": settings.device_class,
        "queue": settings.worker_queue or compile_queue,
    }
    out: list[Collector] = [WorkerInfoCollector(info), BuildInfoCollector(settings.git_commit)]
    if settings.worker_kind == "compile":
        client = scrape_redis(settings)
        workers = WorkerRegistry(client)
        out += [QueueDepthCollector(workers, JobStore(client), [compile_queue]), HeartbeatCollector(workers)]
    elif settings.device.startswith("cuda"):
        gpu = GpuHealthCollector(settings.gpu_uuid, settings.gpu_max_temp_c)
        gpu.start_xid_watch()
        out.append(gpu)
    return out


def exposition_registry(
    multiproc_dir: Path | None, local: CollectorRegistry | None, collectors: Iterable[Collector]
) -> CollectorRegistry:
    """What /metrics serves: every process's files (multiprocess) or this process's `local` registry,
    plus the scrape-time collectors."""
    registry = CollectorRegistry()
    if multiproc_dir is not None:
        registry.register(MultiProcess(multiproc_dir))
    elif local is not None:
        registry.register(local)  # a registry is a collector of its metrics
    for c in collectors:
        registry.register(c)
    return registry


def start_exporter(settings: Settings, registry: CollectorRegistry) -> Any:
    """Serve `registry` on the configured port (a daemon thread); returns the HTTP server."""
    assert settings.metrics_port is not None
    server, _ = start_http_server(settings.metrics_port, addr=settings.metrics_host, registry=registry)
    log.info("metrics on http://%s:%d/metrics", settings.metrics_host, server.server_port)
    return server
