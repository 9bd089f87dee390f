"""The gateway's Redis clients: fail fast, so a request answers 503 quickly rather than hanging on an
unreachable Redis (the problem handlers map `redis.RedisError` to 503)."""

from __future__ import annotations

from typing import TypedDict

import redis
import redis.asyncio
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from evalsvc.settings import Settings


class _FailFast(TypedDict):
    socket_timeout: float
    socket_connect_timeout: float
    health_check_interval: int


def _fail_fast(settings: Settings) -> _FailFast:
    return {
        "socket_timeout": settings.redis_timeout_s,
        "socket_connect_timeout": settings.redis_timeout_s,
        "health_check_interval": 30,
    }


def redis_client(settings: Settings) -> redis.Redis:
    """Fail fast: a gateway answers 503 quickly rather than hanging on an unreachable Redis."""
    retry = Retry(ExponentialBackoff(cap=0.1, base=0.01), retries=1)
    return redis.Redis.from_url(settings.redis_url, retry=retry, **_fail_fast(settings))


def async_redis_client(settings: Settings) -> redis.asyncio.Redis:
    """The same client for what runs on the event loop (the per-request rate limit)."""
    retry = AsyncRetry(ExponentialBackoff(cap=0.1, base=0.01), retries=1)
    return redis.asyncio.Redis.from_url(settings.redis_url, retry=retry, **_fail_fast(settings))
