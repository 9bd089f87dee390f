"""Refusals before work: a per-key token bucket in Redis, a per-tenant quota and global backpressure."""

from __future__ import annotations

import redis.asyncio

from evalsvc.api.problems import ProblemError, retry_after
from evalsvc.queues import COMPILE_QUEUE
from evalsvc.records.jobs import JobStore
from evalsvc.records.keys import P
from evalsvc.settings import Settings

QUOTA_RETRY_AFTER_S = 5
BACKPRESSURE_RETRY_AFTER_S = 10

# KEYS[1] bucket; ARGV rate (tokens/s), burst, cost. Redis' own clock, so gateways need not agree on time.
_TOKEN_BUCKET = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(b[1]) or burst
local ts = tonumber(b[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate)
local wait = 0
if tokens >= cost then tokens = tokens - cost else wait = (cost - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return tostring(wait)
"""


class RateLimiter:
    """A token bucket per API key, shared by every gateway process through one Lua script.

    Asynchronous: every authenticated request passes here, and awaiting one Redis call on the event loop
    is cheaper than handing each request to a worker thread to block on it.
    """

    def __init__(self, client: redis.asyncio.Redis, rate_per_s: float, burst: int) -> None:
        self.rate_per_s = rate_per_s
        self.burst = burst
        self._script = client.register_script(_TOKEN_BUCKET)

    async def check(self, key_id: str, cost: int = 1) -> None:
        """Take `cost` tokens or raise 429 with the seconds until they are there."""
        if self.rate_per_s <= 0:
            return
        raw = await self._script(keys=[P + "ratelimit:" + key_id], args=[self.rate_per_s, self.burst, cost])
        wait = float(raw.decode() if isinstance(raw, bytes) else raw)
        if wait > 0:
            raise ProblemError(
                429,
                "rate_limited",
                f"rate limit of {self.rate_per_s:g}/s exceeded",
                headers=retry_after(wait),
            )


def admit(
    store: JobStore,
    settings: Settings,
    tenant: str,
    new_jobs: int,
    task_ids: list[str] | None = None,
    owner: str | None = None,
) -> set[str]:
    """Refuse new work while the compile queue is at its bound (503: the service is saturated, not the
    caller) or past the tenant's `max_inflight_per_tenant` unfinished jobs (429). Returns which of
    `task_ids` are unknown to `owner` (not stored, or neither its own nor shared; the caller says where
    they were named): all in one round trip."""
    depth, inflight, missing = store.admission_facts(COMPILE_QUEUE, tenant, task_ids or [], owner)
    if depth >= settings.max_queue_depth:
        raise ProblemError(
            503,
            "queue_full",
            f"the compile queue holds {depth} jobs (bound {settings.max_queue_depth}); retry later",
            headers=retry_after(BACKPRESSURE_RETRY_AFTER_S),
        )
    if inflight + new_jobs > settings.max_inflight_per_tenant:
        raise ProblemError(
            429,
            "tenant_quota",
            f"{inflight} jobs in flight, {new_jobs} more would pass the quota of "
            f"{settings.max_inflight_per_tenant}",
            headers=retry_after(QUOTA_RETRY_AFTER_S),
        )
    return set(missing)
