"""Probes and metrics for operators: /livez (process), /readyz (Redis and workers), /metrics."""

from __future__ import annotations

import time

import redis
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from evalsvc.api.deps import MetricsDep, WorkersDep
from evalsvc.api.problems import problem_response
from evalsvc.api.views import ReadyView
from evalsvc.records.documents import WorkerInfo
from evalsvc.records.workers import WorkerRegistry

router = APIRouter(tags=["health"])

HEARTBEAT_STALE_S = 30.0  # the same horizon the compile worker uses when it picks a GPU queue


def live_workers(workers: WorkerRegistry) -> list[WorkerInfo]:
    now = time.time()
    return [w for w in workers.workers() if now - w.heartbeat_at < HEARTBEAT_STALE_S]


@router.get("/livez", name="livez", responses={200: {"description": "The process is up."}})
def livez() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    name="readyz",
    response_model=ReadyView,
    responses={503: {"model": ReadyView, "description": "Not ready (problem document; `missing` says why)."}},
)
def readyz(request: Request, workers: WorkersDep) -> ReadyView | JSONResponse:
    """Ready when Redis answers and at least one compile and one GPU worker are alive."""
    view = readiness(workers)
    if view.ready:
        return view
    detail = "not ready: " + ", ".join(view.missing)
    return problem_response(503, "not_ready", detail, request.url.path, **view.model_dump())


def readiness(registry: WorkerRegistry) -> ReadyView:
    try:
        registry.r.ping()
        workers = live_workers(registry)
    except redis.RedisError as e:
        return ReadyView(ready=False, redis=f"unreachable: {type(e).__name__}", workers={}, missing=["redis"])
    able = [w for w in workers if w.problem is None]
    counts = {kind: sum(1 for w in able if w.kind == kind) for kind in ("compile", "gpu")}
    missing = []
    for kind in (k for k, n in counts.items() if n == 0):
        missing.append(f"a live {kind} worker")
        # A worker that is alive but cannot work says why (e.g. its Docker engine is unreachable).
        missing += [f"{kind} worker {w.hostname}:{w.pid}: {w.problem}" for w in workers if w.kind == kind]
    return ReadyView(ready=not missing, redis="ok", workers=counts, missing=missing)


@router.get(
    "/metrics",
    name="metrics",
    response_class=Response,
    responses={200: {"description": "Prometheus text exposition.", "content": {"text/plain": {}}}},
)
def metrics(metrics: MetricsDep) -> Response:
    return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
