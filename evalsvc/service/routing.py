"""Pick the GPU queue for an evaluation: a live worker of the requested class with the fewest queued jobs."""

from __future__ import annotations

import time

from evalsvc.service.records import WorkerInfo


def gpu_queue_for(workers: list[WorkerInfo], device_class: str, depth: dict[str, int]) -> str | None:
    now = time.time()
    live = [w for w in workers if w.kind == "gpu" and now - w.heartbeat_at < 30]
    if device_class != "default":
        live = [w for w in live if w.device_class == device_class]
    if not live:
        return None
    return min(live, key=lambda w: (depth.get(w.queue, 0), w.queue)).queue
