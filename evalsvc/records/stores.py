"""One store of each kind over one Redis client: what the gateway, a worker and the CLI build at start-up.

Callers take the store they need from it (`records.jobs`, `records.tasks`, ...), never the whole."""

from __future__ import annotations

import redis

from evalsvc.records.batches import BatchStore
from evalsvc.records.catalog import PoolStore
from evalsvc.records.idempotency import IdempotencyKeys
from evalsvc.records.jobs import JobStore
from evalsvc.records.profiles import ProfileStore
from evalsvc.records.tasks import TaskStore
from evalsvc.records.workers import WorkerRegistry


class Records:
    """The system of record over `client`: results, batches and profiles kept `retention_s`, idempotency
    keys `idempotency_ttl_s`; submissions acknowledged once a replica holds them when `replicated`."""

    def __init__(
        self,
        client: redis.Redis,
        retention_s: int = 7 * 86400,
        idempotency_ttl_s: int = 86400,
        replicated: bool = False,
    ) -> None:
        self.r = client
        self.idempotency = IdempotencyKeys(client, idempotency_ttl_s)
        self.tasks = TaskStore(client)
        self.jobs = JobStore(
            client, retention_s=retention_s, idempotency_ttl_s=idempotency_ttl_s, replicated=replicated
        )
        self.batches = BatchStore(client, self.idempotency, retention_s=retention_s)
        self.profiles = ProfileStore(client, retention_s=retention_s)
        self.workers = WorkerRegistry(client)
        self.catalog = PoolStore(client)
