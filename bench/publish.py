"""Publishing a batch of compile jobs to the broker, side by side in one run: Celery's `send_task` per job
on one connection against `Enqueuer.enqueue_many` (Celery's own messages, all pushed with one LPUSH),
alternating, on a real redis-server.

    python -m bench.publish --jobs 512 --rounds 8
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import redis

from bench.live_stack import free_port, wait_for
from evalsvc.api.enqueue import CeleryEnqueuer
from evalsvc.queues import COMPILE_QUEUE, COMPILE_TASK
from evalsvc.settings import Settings
from evalsvc.stack import redis_command


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="evalsvc-publish-"))
    port = free_port()
    server = subprocess.Popen(redis_command(port, root, fsync="everysec"), stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url)

        def answers() -> bool:
            try:
                return bool(client.ping())
            except redis.ConnectionError:
                return False

        wait_for(answers, 30, "redis-server")
        enqueuer = CeleryEnqueuer.from_settings(Settings(redis_url=url))
        celery = enqueuer.celery

        def per_message(ids: list[str]) -> None:
            with celery.producer_or_acquire() as producer:
                for job_id in ids:
                    celery.send_task(COMPILE_TASK, args=[job_id], queue=COMPILE_QUEUE, producer=producer)

        ways = {"send_task per job": per_message, "enqueue_many": enqueuer.enqueue_many}
        times: dict[str, list[float]] = {name: [] for name in ways}
        for r in range(args.rounds + 1):  # round 0 warms both up and is not counted
            for name, publish in ways.items():
                ids = [f"j-{r}-{name[:4]}-{i}" for i in range(args.jobs)]
                t = time.perf_counter()
                publish(ids)
                if r:
                    times[name].append(time.perf_counter() - t)
        sent = client.llen(COMPILE_QUEUE)
        assert sent == 2 * (args.rounds + 1) * args.jobs, sent
        enqueuer.close()
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(root, ignore_errors=True)
    print(f"| {args.jobs} jobs per batch, {args.rounds} rounds | median ms | min ms | max ms |")
    print("|---|---|---|---|")
    for name, ts in times.items():
        print(f"| {name} | {1e3 * statistics.median(ts):.0f} | {1e3 * min(ts):.0f} | {1e3 * max(ts):.0f} |")
    print(json.dumps({k: [round(1e3 * t, 1) for t in v] for k, v in times.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
