"""Workers: their heartbeats (who is alive, on which queue, with which device), the device classes served
lately, and the choice of a GPU queue for an evaluation."""

from __future__ import annotations

import time
from typing import cast

import redis

from evalsvc.records.documents import WorkerInfo
from evalsvc.records.keys import P, text

# zset: GPU worker device class -> its newest heartbeat: which classes are served now, and which were
# served a moment ago (a worker restarting); kept beside the workers' own keys, which expire
DEVICE_CLASSES = P + "device-classes"
HEARTBEAT_TTL_S = 15  # a worker beats every 5 s; its key outlives three missed beats
DEVICE_CLASS_MEMORY_S = 7 * 86400  # classes unseen for longer are forgotten


def gpu_queue_for(workers: list[WorkerInfo], device_class: str, depth: dict[str, int]) -> str | None:
    """Pick the GPU queue for an evaluation: a live worker of the requested class with the fewest queued
    jobs."""
    now = time.time()
    live = [w for w in workers if w.kind == "gpu" and now - w.heartbeat_at < 30]
    if device_class != "default":
        live = [w for w in live if w.device_class == device_class]
    if not live:
        return None
    return min(live, key=lambda w: (depth.get(w.queue, 0), w.queue)).queue


class WorkerRegistry:
    def __init__(self, client: redis.Redis) -> None:
        self.r = client

    def heartbeat(self, info: WorkerInfo, ttl_s: int = HEARTBEAT_TTL_S) -> None:
        """A worker is alive: its key (gone `ttl_s` after its last beat) and, for a device worker, its
        class's last beat (what submissions are checked against, `device_classes`)."""
        pipe = self.r.pipeline(transaction=False)
        # by name: two compile workers of one host share their queue and hostname, not their name
        key = P + "worker:" + info.queue + ":" + (info.name or info.hostname)
        pipe.set(key, info.model_dump_json(), ex=ttl_s)
        if info.kind == "gpu":
            pipe.zadd(DEVICE_CLASSES, {info.device_class: info.heartbeat_at}, gt=True)
            pipe.zremrangebyscore(DEVICE_CLASSES, 0, info.heartbeat_at - DEVICE_CLASS_MEMORY_S)
        pipe.execute()

    def device_classes(self, within_s: float) -> dict[str, float]:
        """Device classes some GPU worker beat for within the last `within_s`: class -> its newest beat."""
        got = self.r.zrangebyscore(DEVICE_CLASSES, time.time() - within_s, "+inf", withscores=True)
        return {text(c): float(t) for c, t in cast("list[tuple[bytes, float]]", got)}

    def workers(self) -> list[WorkerInfo]:
        keys = list(self.r.scan_iter(P + "worker:*", count=1000))
        raws = self.r.mget(keys) if keys else []
        return [WorkerInfo.model_validate_json(r) for r in raws if r]

    def gpu_queue(self, device_class: str) -> str | None:
        """The queue of the least busy live GPU worker of `device_class` (`gpu_queue_for`), None when no
        live GPU worker serves it."""
        workers = self.workers()
        depth = {w.queue: int(self.r.llen(w.queue)) for w in workers if w.kind == "gpu"}
        return gpu_queue_for(workers, device_class, depth)
