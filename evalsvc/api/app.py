"""The gateway's app factory: validate, hash, store, enqueue, answer. No torch, no heavy work.

Clients (Redis, the job store, the enqueuer, the rate limiter) are made by the lifespan and kept on
`app.state`; routes reach them through the Annotated dependencies in `deps`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute

from evalsvc.api.auth import Authenticator
from evalsvc.api.body_limit import BodyLimitMiddleware
from evalsvc.api.enqueue import CeleryEnqueuer
from evalsvc.api.limits import RateLimiter
from evalsvc.api.metrics import Metrics, MetricsMiddleware
from evalsvc.api.orphans import sweep_forever
from evalsvc.api.problems import as_problem_media, install_handlers
from evalsvc.api.routes import batches, compile, devices, evaluations, events, health, profiles, suites, tasks
from evalsvc.observability.logs import setup_logging
from evalsvc.queues import Enqueuer
from evalsvc.records.cancellation import Canceller
from evalsvc.records.stores import Records
from evalsvc.redis_clients import async_redis_client, redis_client
from evalsvc.settings import Settings

log = logging.getLogger("evalsvc.api")

API_VERSION = "1.0.0"
DESCRIPTION = (
    "Sandboxed evaluation of CUDA/C++ kernels against PyTorch references.\n\n"
    "Authenticate with `Authorization: Bearer <key>` or `X-API-Key: <key>`. Every error is an RFC 9457 "
    "problem document (`application/problem+json`) with a machine-readable `code`; 429 and 503 carry "
    "`Retry-After`. POSTs that create jobs accept an `Idempotency-Key` header."
)


def create_app(settings: Settings, *, enqueuer: Enqueuer | None = None) -> FastAPI:
    """Build the gateway. `enqueuer` replaces the Celery one (tests of the gateway alone)."""
    app = FastAPI(
        title="evalsvc",
        version=API_VERSION,
        description=DESCRIPTION,
        lifespan=_lifespan(settings, enqueuer),
        generate_unique_id_function=_operation_id,
    )
    app.state.settings = settings
    app.state.metrics = Metrics(settings.prometheus_multiproc_dir, settings.git_commit)
    app.state.auth = Authenticator(settings.api_keys)
    install_handlers(app)
    for module in (tasks, profiles, suites, evaluations, batches, events, compile, devices, health):
        app.include_router(module.router)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)  # outermost: times refusals too
    app.openapi = _problem_openapi(app.openapi)  # type: ignore[method-assign]
    return app


def create_app_from_env() -> FastAPI:
    """The factory uvicorn's worker processes call (`--workers N` needs an import string, not an app)."""
    return create_app(Settings())


def _lifespan(settings: Settings, enqueuer: Enqueuer | None) -> Callable[[FastAPI], Any]:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        setup_logging(settings.log_format, settings.log_level)  # JSON lines, as the workers write
        client = redis_client(settings)
        aclient = async_redis_client(settings)
        app.state.records = Records(
            client,
            retention_s=settings.retention_s,
            idempotency_ttl_s=settings.idempotency_ttl_s,
            # Sentinel promotes a replica when the primary dies: a submission is acknowledged once one has it
            replicated=settings.redis_sentinel is not None,
        )
        app.state.canceller = Canceller(app.state.records.jobs)
        app.state.async_redis = aclient  # the rate limit's, and the event streams' subscriptions
        app.state.limiter = RateLimiter(aclient, settings.rate_limit_per_s, settings.rate_burst)
        app.state.enqueuer = enqueuer or CeleryEnqueuer.from_settings(settings)
        if not settings.api_keys:
            log.warning(
                "!!! AUTHENTICATION IS OFF: EVALSVC_API_KEYS is empty, every caller is tenant 'anonymous'. "
                'Set EVALSVC_API_KEYS=\'{"<key>": "<tenant>"}\' anywhere but a trusted dev machine. !!!'
            )
        sweep = sweep_forever(app.state.records.jobs, app.state.enqueuer, settings.redelivery_after_s)
        sweeper = asyncio.create_task(sweep)
        try:
            yield
        finally:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
            app.state.enqueuer.close()
            client.close()
            await aclient.aclose()

    return lifespan


def _operation_id(route: APIRoute) -> str:
    return route.name


def _problem_openapi(base: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    """FastAPI documents extra responses as application/json; ours are application/problem+json."""
    done = False

    def openapi() -> dict[str, Any]:
        nonlocal done
        schema = base()
        if not done:
            as_problem_media(schema)
            known = schema.setdefault("components", {}).setdefault("schemas", {})
            for name, model in events.event_schemas().items():
                known.setdefault(name, model)
            done = True
        return schema

    return openapi
