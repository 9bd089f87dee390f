"""Idempotency keys: a retried POST with the same (tenant-scoped, hashed) `Idempotency-Key` gets the same
job or batch back. A job's key is claimed inside the job store's creation script, with the job (one
step); a batch's here, by SET NX. Both live under `idempotency_key` for `idempotency_ttl_s`."""

from __future__ import annotations

from typing import cast

import redis

from evalsvc.records.keys import P


def idempotency_key(key: str) -> str:
    """The Redis string that holds the id of what the first POST with `key` created."""
    return P + "idem:" + key


class IdempotencyKeys:
    def __init__(self, client: redis.Redis, ttl_s: int = 86400) -> None:
        self.r = client
        self.ttl_s = ttl_s

    def lookup(self, key: str) -> str | None:
        """The id an earlier POST with this key created, None when there is none (or it expired)."""
        raw = cast(bytes | None, self.r.get(idempotency_key(key)))  # the client does not decode responses
        return raw.decode() if raw else None

    def claim(self, key: str, value: str) -> str | None:
        """SET NX; returns the value already there, or None when this call claimed the key."""
        if self.r.set(idempotency_key(key), value, nx=True, ex=self.ttl_s):
            return None
        return self.lookup(key)
