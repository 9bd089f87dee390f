"""Annotated dependencies: what routes get from `app.state` (built once by the lifespan)."""

from __future__ import annotations

from typing import Annotated, Literal

import redis.asyncio
from fastapi import Depends, Header, Path, Query, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from evalsvc.api.auth import Authenticator, Principal
from evalsvc.api.limits import RateLimiter
from evalsvc.api.metrics import Metrics
from evalsvc.api.problems import ProblemError
from evalsvc.queues import Enqueuer
from evalsvc.records.batches import BatchStore
from evalsvc.records.cancellation import Canceller
from evalsvc.records.catalog import PoolStore
from evalsvc.records.idempotency import IdempotencyKeys
from evalsvc.records.jobs import JobStore
from evalsvc.records.profiles import ProfileStore
from evalsvc.records.stores import Records
from evalsvc.records.tasks import TaskStore
from evalsvc.records.workers import WorkerRegistry
from evalsvc.settings import Settings


async def _settings(request: Request) -> Settings:
    return request.app.state.settings


def _records(request: Request) -> Records:
    return request.app.state.records


async def _jobs(request: Request) -> JobStore:
    return _records(request).jobs


async def _tasks(request: Request) -> TaskStore:
    return _records(request).tasks


async def _batches(request: Request) -> BatchStore:
    return _records(request).batches


async def _profiles(request: Request) -> ProfileStore:
    return _records(request).profiles


async def _workers(request: Request) -> WorkerRegistry:
    return _records(request).workers


async def _idempotency(request: Request) -> IdempotencyKeys:
    return _records(request).idempotency


async def _catalog(request: Request) -> PoolStore:
    return _records(request).catalog


async def _enqueuer(request: Request) -> Enqueuer:
    return request.app.state.enqueuer


async def _metrics(request: Request) -> Metrics:
    return request.app.state.metrics


async def _canceller(request: Request) -> Canceller:
    return request.app.state.canceller


async def _async_redis(request: Request) -> redis.asyncio.Redis:
    return request.app.state.async_redis


SettingsDep = Annotated[Settings, Depends(_settings)]
JobsDep = Annotated[JobStore, Depends(_jobs)]
TasksDep = Annotated[TaskStore, Depends(_tasks)]
BatchesDep = Annotated[BatchStore, Depends(_batches)]
ProfilesDep = Annotated[ProfileStore, Depends(_profiles)]
WorkersDep = Annotated[WorkerRegistry, Depends(_workers)]
IdempotencyDep = Annotated[IdempotencyKeys, Depends(_idempotency)]
CatalogDep = Annotated[PoolStore, Depends(_catalog)]
EnqueuerDep = Annotated[Enqueuer, Depends(_enqueuer)]
MetricsDep = Annotated[Metrics, Depends(_metrics)]
CancellerDep = Annotated[Canceller, Depends(_canceller)]
AsyncRedisDep = Annotated[redis.asyncio.Redis, Depends(_async_redis)]

_bearer = HTTPBearer(auto_error=False, description="`Authorization: Bearer <API key>`")
_api_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="the API key")


async def current_principal(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    api_key: Annotated[str | None, Depends(_api_key)],
) -> Principal:
    """Authenticate (401) and take a token from the caller's rate-limit bucket (429)."""
    auth: Authenticator = request.app.state.auth
    presented = bearer.credentials if bearer is not None else api_key
    client = request.client.host if request.client else "unknown"
    principal = auth.authenticate(presented, client)
    if principal is None:
        raise ProblemError(
            401,
            "unauthorized",
            "missing or unknown API key (send `Authorization: Bearer <key>` or `X-API-Key`)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    limiter: RateLimiter = request.app.state.limiter
    await limiter.check(principal.key_id)
    return principal


PrincipalDep = Annotated[Principal, Depends(current_principal)]

_ID = r"^[A-Za-z0-9_-]{1,64}$"
JobIdPath = Annotated[str, Path(pattern=_ID, description="job id as returned on submission")]
TaskIdPath = Annotated[str, Path(pattern=_ID, description="task id (content hash)")]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        description="same key (per tenant) on a retried POST gives the same job and the same answer",
    ),
]


def wait_query(default: float) -> object:
    return Query(
        ge=0,
        le=3600,
        description=f"long-poll up to this many seconds for completion (default {default:g}; capped by "
        "the server's `max_wait_s`)",
    )


WaitQuery = Annotated[float, wait_query(0)]
FormatQuery = Annotated[
    Literal["json", "text"],
    Query(alias="format", description="`text`: a compact plain-text report sized for an LLM context"),
]
DeviceClassQuery = Annotated[
    str,
    Query(max_length=64, pattern=r"^[A-Za-z0-9_.-]+$", description="GPU class, e.g. H200; `default`: any"),
]
