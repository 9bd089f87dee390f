"""Every Redis client the service makes, one function per way of waiting: the gateway fails fast (a
request answers 503 quickly rather than hanging on an unreachable Redis; the problem handlers map
`redis.RedisError` to 503), a worker is patient (it rides out a Redis restart or a Sentinel failover
holding a result), a metrics scrape gives up after two seconds, and the operator's CLI and the artifact
store take redis-py's defaults. Here, not in `evalsvc.api` or `workers`, so that both sides import it.

`connect` is the one place a URL becomes a client: a single Redis directly, a Sentinel deployment
(`sentinel://...`, docs/operations.md) through its sentinels, asked for the current primary on every new
connection, so a client's retries reach the replica Sentinel promoted. `celery_broker` says the same to
Kombu, in its own URL form."""

from __future__ import annotations

import socket
from typing import Any, TypedDict, TypeVar
from urllib.parse import quote

import redis
import redis.asyncio
import redis.asyncio.sentinel
import redis.sentinel
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialBackoff, ExponentialWithJitterBackoff
from redis.retry import Retry

from evalsvc.settings import RedisSentinel, Settings

Client = TypeVar("Client", redis.Redis, redis.asyncio.Redis)


def connect(settings: Settings, kind: type[Client], **options: Any) -> Client:
    """A `kind` client (sync or asyncio) with `options` (timeouts, retries) for `settings.redis_url`.
    Through Sentinel the sentinels are asked with the same socket timeouts (redis-py's default) and no
    password; the primary with the URL's database and login."""
    target = settings.redis_sentinel
    if target is None:
        return kind.from_url(settings.redis_url, **options)
    options |= {"db": target.db, "username": target.username, "password": target.password}
    if kind is redis.asyncio.Redis:
        found = redis.asyncio.sentinel.Sentinel(target.sentinels, **options)
        return found.master_for(
            target.master, redis_class=redis.asyncio.Redis, connection_class=_AsyncFollowingPrimary
        )
    found_ = redis.sentinel.Sentinel(target.sentinels, **options)
    return found_.master_for(target.master, connection_class=_FollowingPrimary)


class _FollowingPrimary(redis.sentinel.SentinelManagedConnection):
    """A connection that asks the sentinels for the primary before every socket connect. redis-py's own
    reconnects a dropped connection, and retries that, at the address it last had (redis/redis-py#3874):
    after a failover, the dead primary's, until a worker's two minutes of retries run out (seen in
    tests/scale/test_sentinel_failover.py: an evaluation stuck 113 s, then failed)."""

    def _connect(self) -> socket.socket:
        if self.connection_pool.is_master:
            self.host, self.port = self.connection_pool.get_master_address()
        return super()._connect()


class _AsyncFollowingPrimary(redis.asyncio.sentinel.SentinelManagedConnection):
    """`_FollowingPrimary` for the asyncio client (the same redis-py issue)."""

    async def _connect(self) -> None:
        if self.connection_pool.is_master:
            self.host, self.port = await self.connection_pool.get_master_address()
        return await super()._connect()


def celery_broker(settings: Settings) -> tuple[str, dict[str, str]]:
    """Kombu's broker URL and the transport options it needs besides: a single Redis as it is; a Sentinel
    deployment as Kombu spells it (`sentinel://host:port/db;sentinel://...`, the master by name)."""
    target = settings.redis_sentinel
    if target is None:
        return settings.redis_url, {}
    return ";".join(_kombu_sentinel(target, i) for i in range(len(target.sentinels))), {
        "master_name": target.master
    }


def _kombu_sentinel(target: RedisSentinel, i: int) -> str:
    host, port = target.sentinels[i]
    host = f"[{host}]" if ":" in host else host
    login = ""
    if i == 0 and (target.username or target.password):  # Kombu reads the login from the first URL
        login = f"{quote(target.username or '', safe='')}:{quote(target.password or '', safe='')}@"
    return f"sentinel://{login}{host}:{port}/{target.db}"


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


def _library_retry() -> Retry:
    """redis-py 8's default, spelt out: a client built through Sentinel gets none unless it is given one."""
    return Retry(ExponentialWithJitterBackoff(base=0.01, cap=1.0), retries=10)


def redis_client(settings: Settings) -> redis.Redis:
    """Fail fast: a gateway answers 503 quickly rather than hanging on an unreachable Redis."""
    retry = Retry(ExponentialBackoff(cap=0.1, base=0.01), retries=1)
    return connect(settings, redis.Redis, retry=retry, **_fail_fast(settings))


def async_redis_client(settings: Settings) -> redis.asyncio.Redis:
    """The same client for what runs on the event loop (the per-request rate limit)."""
    retry = AsyncRetry(ExponentialBackoff(cap=0.1, base=0.01), retries=1)
    return connect(settings, redis.asyncio.Redis, retry=retry, **_fail_fast(settings))


def worker_redis(settings: Settings) -> redis.Redis:
    """Patient with Redis: a worker holding a finished evaluation rides out a Redis restart or a failover
    (about two minutes of retries) rather than losing the result; the gateway, in contrast, fails fast
    (503). Sentinel's 'no primary known yet' (`MasterNotFoundError`) is a ConnectionError: retried too."""
    return connect(
        settings,
        redis.Redis,
        socket_timeout=30,
        socket_connect_timeout=5,
        retry=Retry(ExponentialBackoff(cap=2.0, base=0.05), retries=60),
        retry_on_error=[redis.ConnectionError, redis.TimeoutError],
        health_check_interval=30,
    )


def scrape_redis(settings: Settings) -> redis.Redis:
    """A metrics scrape gives up after two seconds rather than hold the scraper."""
    return connect(settings, redis.Redis, socket_timeout=2, socket_connect_timeout=2, retry=_library_retry())


def plain_redis(settings: Settings) -> redis.Redis:
    """redis-py's defaults (no timeouts): the operator's CLI and the Redis artifact store."""
    return connect(settings, redis.Redis, retry=_library_retry())
