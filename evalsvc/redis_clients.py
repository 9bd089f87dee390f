"""Every Redis client the service makes, one function per way of waiting: the gateway fails fast (a
request answers 503 quickly rather than hanging on an unreachable Redis; the problem handlers map
`redis.RedisError` to 503), a worker is patient (it rides out a Redis restart holding a result), a
metrics scrape gives up after two seconds, and the operator's CLI and the artifact store take redis-py's
defaults. Here, not in `evalsvc.api` or `workers`, so that both sides import it."""

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


def worker_redis(settings: Settings) -> redis.Redis:
    """Patient with Redis: a worker holding a finished evaluation rides out a Redis restart (about two
    minutes of retries) rather than losing the result; the gateway, in contrast, fails fast (503)."""
    return redis.Redis.from_url(
        settings.redis_url,
        socket_timeout=30,
        socket_connect_timeout=5,
        retry=Retry(ExponentialBackoff(cap=2.0, base=0.05), retries=60),
        retry_on_error=[redis.ConnectionError, redis.TimeoutError],
        health_check_interval=30,
    )


def scrape_redis(settings: Settings) -> redis.Redis:
    """A metrics scrape gives up after two seconds rather than hold the scraper."""
    return redis.Redis.from_url(settings.redis_url, socket_timeout=2, socket_connect_timeout=2)


def plain_redis(settings: Settings) -> redis.Redis:
    """redis-py's defaults (no timeouts): the operator's CLI and the Redis artifact store."""
    return redis.Redis.from_url(settings.redis_url)
