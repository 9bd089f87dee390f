"""The fleet-shared baseline cache in Redis: one measurement per (task, device, torch, mode, precision)
serves every GPU worker of that class."""

from __future__ import annotations

import redis

from evalsvc.core.results import TimingStats

PREFIX = "evalsvc:baseline:"


class RedisBaselineCache:
    def __init__(self, client: redis.Redis, ttl_s: int | None = None) -> None:
        self.r = client
        self.ttl_s = ttl_s

    def get(self, key: str) -> TimingStats | None:
        raw = self.r.get(PREFIX + key)
        return TimingStats.model_validate_json(raw) if raw else None

    def put(self, key: str, stats: TimingStats) -> None:
        self.r.set(PREFIX + key, stats.model_dump_json(), ex=self.ttl_s)
