"""Batches: the ids of a batch's jobs, in submission order, kept as long as the jobs are."""

from __future__ import annotations

import json

import redis

from evalsvc.records.idempotency import IdempotencyKeys
from evalsvc.records.keys import P, new_id


class BatchStore:
    def __init__(
        self, client: redis.Redis, idempotency: IdempotencyKeys, retention_s: int = 7 * 86400
    ) -> None:
        self.r = client
        self.idempotency = idempotency
        self.retention_s = retention_s

    def create_batch(self, job_ids: list[str], idempotency_key: str | None = None) -> tuple[str, bool]:
        """Store a new batch of `job_ids`, or return the one an earlier POST with `idempotency_key` made
        (True when it existed)."""
        bid = new_id("b")
        if idempotency_key:
            existing = self.idempotency.claim(idempotency_key, bid)
            if existing:
                return existing, True
        self.r.set(P + "batch:" + bid, json.dumps(job_ids), ex=self.retention_s)
        return bid, False

    def get_batch(self, batch_id: str) -> list[str] | None:
        raw = self.r.get(P + "batch:" + batch_id)
        return json.loads(raw) if raw else None
