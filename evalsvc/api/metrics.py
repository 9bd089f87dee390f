"""Prometheus metrics of the gateway: latency by route template and status class, submissions (also by
tenant), problems, and the build (evalsvc_build_info).

Each app owns its registry (tests build many apps). When PROMETHEUS_MULTIPROC_DIR is set, values go to
prometheus-client's shared files and /metrics aggregates every process's files instead.
"""

from __future__ import annotations

import time
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from evalsvc.observability.build_info import BuildInfoCollector

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class Metrics:
    def __init__(self, multiproc_dir: Path | None, git_commit: str | None = None) -> None:
        self.multiproc_dir = multiproc_dir
        self.build = BuildInfoCollector(git_commit)
        self.registry = CollectorRegistry()
        self.registry.register(self.build)
        self.latency = Histogram(
            "evalsvc_http_request_duration_seconds",
            "HTTP request latency (long-polls included)",
            ["route", "method", "status_class"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.submissions = Counter(
            "evalsvc_submissions",
            "jobs submitted, by kind and whether they were served from an existing job",
            ["kind", "outcome"],
            registry=self.registry,
        )
        # Tenants are the values of the configured API keys (EVALSVC_API_KEYS) or "anonymous": a bounded set.
        self.tenant_submissions = Counter(
            "evalsvc_tenant_submissions",
            "jobs submitted, by tenant and kind (new and served from an existing job alike)",
            ["tenant", "kind"],
            registry=self.registry,
        )
        self.cancellations = Counter(
            "evalsvc_cancellations",
            "jobs cancelled by their tenant (DELETE), by the state they were cancelled in",
            ["state"],
            registry=self.registry,
        )
        self.problems = Counter(
            "evalsvc_http_problems", "problem responses by code", ["code"], registry=self.registry
        )

    def submitted(self, kind: str, existed: bool, tenant: str, n: int = 1) -> None:
        self.submissions.labels(kind, "existing" if existed else "new").inc(n)
        self.tenant_submissions.labels(tenant, kind).inc(n)

    def cancelled(self, state: str) -> None:
        self.cancellations.labels(state).inc()

    def exposition(self) -> bytes:
        if self.multiproc_dir is None:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=str(self.multiproc_dir))
        registry.register(self.build)
        return generate_latest(registry)


class MetricsMiddleware:
    """Times every request; labels by route template (never the raw path, to bound cardinality)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            self.metrics.latency.labels(route, scope["method"], f"{status // 100}xx").observe(
                time.perf_counter() - started
            )
