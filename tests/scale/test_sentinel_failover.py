"""Redis through Sentinel, end to end (docs/operations.md, "Redis with Sentinel"): every Redis client the
service makes finds the primary through three sentinels, and a live stack (gateway, compile worker on the
Docker sandbox, CPU-device worker) loses and doubles no evaluation when its primary is killed with -9 under
a batch.

Replication is asynchronous, so the test makes the loss it can cause happen for certain: it holds the
replication stream (`PrimaryRelay`) before the kill. Everything the primary acknowledged from then on is
gone after the failover; the test checks what the service does about each kind of write:
- a submission is acknowledged only once the replica holds it: during the hold the gateway answers 503 and
  the client's retry after the failover is accepted (nothing acknowledged is lost);
- progress and results written during the hold roll back: a result read then is evaluated again after the
  failover (its message is still in the replica's queue, or in Kombu's unacked set and redelivered), and
  then written once, never again;
- the completion records agree: the tenant's count of unfinished jobs is back to 0 and neither sweep index
  (evalsvc.api.orphans) holds a finished job.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from evalsvc.queues import COMPILE_QUEUE, make_celery
from evalsvc.records.keys import PROGRESS, UNQUEUED, inflight_key
from evalsvc.redis_clients import (
    async_redis_client,
    connect,
    plain_redis,
    redis_client,
    scrape_redis,
    worker_redis,
)
from evalsvc.settings import Settings
from evalsvc.suite import cases
from evalsvc.wiring import make_store
from tests.live_stack import LiveStack
from tests.reliability.conftest import options, small_relu
from tests.scale.sentinel_deployment import SentinelDeployment, wait_until

pytestmark = pytest.mark.docker

REDELIVERY_S = 8  # a delivered message whose worker went away comes back after this (Kombu's visibility)
TENANT = "anonymous"  # authentication is off in this stack
IN_FLIGHT = "evalsvc:probe:in-flight"


@pytest.fixture(scope="module")
def deployment() -> Iterator[SentinelDeployment]:
    root = Path(tempfile.mkdtemp(prefix="evalsvc-sentinel-"))
    d = SentinelDeployment(root)
    try:
        d.start()
        yield d
    finally:
        d.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def stack(docker_ready: None, deployment: SentinelDeployment) -> Iterator[LiveStack]:
    root = Path(tempfile.mkdtemp(prefix="evalsvc-sentinel-stack-"))
    env = {
        "EVALSVC_REDELIVERY_AFTER_S": str(REDELIVERY_S),
        "EVALSVC_ROUTE_WAIT_S": "600",  # jobs wait out a failover for a device worker's heartbeat
        "EVALSVC_RATE_LIMIT_PER_S": "1000",  # on: the gateway's asyncio client goes through Sentinel too
        "EVALSVC_LOG_FORMAT": "text",
    }
    s = LiveStack(root, {"cpu-a": "gpu.cpu-a"}, 1, redis_url=deployment.url, env=env)
    try:
        s.start()
        yield s
    finally:
        s.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_every_client_reaches_the_primary_through_sentinel(
    deployment: SentinelDeployment, tmp_path: Path
) -> None:
    settings = Settings(redis_url=deployment.url, artifact_store="redis", data_dir=tmp_path)
    clients = {
        "gateway": redis_client(settings),
        "worker": worker_redis(settings),
        "scrape": scrape_redis(settings),
        "plain": plain_redis(settings),
    }
    primary = deployment.node(deployment.primary_port)
    for name, client in clients.items():
        client.set(f"probe:{name}", name)
        assert primary.get(f"probe:{name}") == name.encode(), name

    async def through_asyncio() -> bytes | None:
        client = async_redis_client(settings)
        try:
            await client.set("probe:async", "async")
            return await client.get("probe:async")
        finally:
            await client.aclose()

    assert asyncio.run(through_asyncio()) == b"async"
    assert primary.get("probe:async") == b"async"

    store = make_store(settings)  # the Redis artifact store, on the plain client
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "kernel.so").write_bytes(b"\x7fELF artifact")
    store.put("k1", tmp_path / "build")
    assert primary.exists("evalsvc:artifact:k1")
    assert store.fetch("k1", tmp_path / "back") and (tmp_path / "back" / "kernel.so").read_bytes().startswith(
        b"\x7fELF"
    )

    app = make_celery(settings)  # Kombu's own Sentinel transport, the master by name
    app.send_task("evalsvc.probe", args=["x"], queue="probe-queue")
    assert primary.llen("probe-queue") == 1
    app.close()


def test_primary_killed_under_a_batch_loses_and_doubles_nothing(
    deployment: SentinelDeployment, stack: LiveStack
) -> None:
    task, _ = small_relu()
    ok, wrong = (
        next(c for c in cases("cpu") if c.task_id == "l1/relu" and c.expect == e) for e in ("ok", "incorrect")
    )
    r = httpx.post(stack.url + "/v1/tasks", json=task.model_dump(mode="json"), timeout=30)
    assert r.status_code in (200, 201), r.text
    task_id = r.json()["id"]

    def batch(cases_: list, first: int) -> list[dict]:  # type: ignore[type-arg]
        return [
            {
                "task_id": task_id,
                "solution": c.solution().model_dump(mode="json"),
                "options": options(first + i),
            }
            for i, c in enumerate(cases_)
        ]

    def post(items: list[dict], key: str) -> httpx.Response:  # type: ignore[type-arg]
        body, headers = {"evaluations": items}, {"Idempotency-Key": key}
        try:
            return httpx.post(stack.url + "/v1/batches", json=body, headers=headers, timeout=30)
        except httpx.HTTPError as e:  # the gateway's own Redis calls time out: as a 503 would
            return httpx.Response(599, text=str(e))

    expect: dict[str, str] = {}
    a_items, b_items = [ok, wrong, ok], [wrong]
    a = post(batch(a_items, 0), "a")
    assert a.status_code == 202, a.text
    a_ids = [item["id"] for item in a.json()["items"]]
    expect.update({i: c.expect for i, c in zip(a_ids, a_items, strict=True)})

    # From here on, the primary's writes reach no replica: the last moments before a primary dies.
    assert deployment.relay is not None
    deployment.relay.hold()
    held_at = time.time()
    held = post(batch(b_items, 100), "b")
    assert held.status_code == 503, held.text
    assert held.json()["code"] == "store_unavailable" and "replica" in held.json()["detail"], held.text

    read_then_lost = wait_until(
        lambda: first_done(stack, a_ids), 300, "an evaluation done on the held primary"
    )
    assert read_then_lost["updated_at"] > held_at  # written on the primary alone

    # A worker's command in flight when the primary dies is sent again to the promoted replica (redis-py
    # alone would reconnect to the dead primary's address: evalsvc.redis_clients._FollowingPrimary).
    in_flight: dict[str, object] = {}
    blocked = worker_redis(Settings(redis_url=deployment.url))
    blocked.ping()
    waiter = threading.Thread(target=lambda: in_flight.update(got=blocked.blpop(IN_FLIGHT, timeout=20)))
    waiter.start()
    wait_until(lambda: blocked_in_blpop(deployment), 60, "the worker's BLPOP to block")

    deployment.kill("primary")
    killed, held_for = time.monotonic(), time.time() - held_at
    deployment.relay.cut()
    seconds_to_write = first_write_after(deployment, killed)
    connect(Settings(redis_url=deployment.url), redis.Redis, socket_timeout=5).rpush(IN_FLIGHT, "after")
    waiter.join(timeout=300)
    assert in_flight.get("got") == (IN_FLIGHT.encode(), b"after"), in_flight
    b = wait_until(lambda: accepted(post(batch(b_items, 100), "b")), 300, "the batch accepted again")
    seconds_to_accept = time.monotonic() - killed
    assert deployment.master_port() == deployment.replica_port  # the replica was promoted
    b_ids = [item["id"] for item in b.json()["items"]]
    expect.update({i: c.expect for i, c in zip(b_ids, b_items, strict=True)})

    finals = {i: wait_done(stack, i) for i in expect}  # None: the record is gone (404)
    recovered = time.monotonic()
    lost = sorted(i for i, v in finals.items() if v is None)  # acknowledged, then gone
    store = connect(Settings(redis_url=deployment.url), redis.Redis, socket_timeout=5)
    # 0 doubled: a second finish can only come from a message still queued or delivered (acks are late, so
    # a running task's message stays in Kombu's unacked hash, and one whose ack was lost comes back from it).
    # Once none is left, no evaluation can run again: every document is final.
    queues = {COMPILE_QUEUE, *stack.device_workers.values()}
    wait_until(lambda: broker_quiet(store, queues), 300, "no message left queued or unacknowledged")
    doubled = []
    for job_id, first in finals.items():
        now = httpx.get(f"{stack.url}/v1/evaluations/{job_id}", timeout=30).json()
        if first is not None and (now["updated_at"], now["result"]) != (first["updated_at"], first["result"]):
            doubled.append(job_id)
    again = finals[read_then_lost["id"]]  # the result read on the held primary was lost, then made again
    redone = again is not None and again["updated_at"] > read_then_lost["updated_at"]
    print(
        f"\nfailover (kill -9 of the primary, down-after {deployment.down_after_ms} ms): "
        f"{len(expect)} evaluations acknowledged, {len(lost)} lost, {len(doubled)} doubled, "
        f"{int(redone)} of 1 result read on the held primary evaluated again. First write through Sentinel "
        f"{seconds_to_write:.2f} s after the kill; first batch accepted by the gateway "
        f"{seconds_to_accept:.2f} s after it. Primary held {held_for:.1f} s, all done "
        f"{recovered - killed:.1f} s after the kill"
    )
    assert lost == [] and doubled == [], (lost, doubled)
    statuses = {i: v["status"] for i, v in finals.items() if v is not None}
    assert statuses == expect, {
        i: (v["status"], (v["result"] or {}).get("message")) for i, v in finals.items() if v is not None
    }
    assert redone, (read_then_lost, again)
    assert int(store.get(inflight_key(TENANT)) or 0) == 0  # each job ended once in the surviving history
    indexed = {m.decode() for key in (UNQUEUED, PROGRESS) for m in store.zrange(key, 0, -1)}
    assert not indexed & set(expect), indexed & set(expect)


def broker_quiet(store: redis.Redis, queues: set[str]) -> bool:
    """No message of `queues` waits (Kombu's lists, one per priority: `name\\x06\\x16N`) and none is delivered
    and unacknowledged (Kombu's `unacked` hash), twice a second apart: a delivery pops the list before it
    writes the hash."""
    for look in range(2):
        waiting = [k for k in store.scan_iter(_type="list") if k.decode().split("\x06\x16")[0] in queues]
        if waiting or store.hlen("unacked"):
            return False
        if look == 0:
            time.sleep(1)
    return True


def blocked_in_blpop(deployment: SentinelDeployment) -> bool:
    """A client of the primary waits in BLPOP (Celery's workers wait in BRPOP)."""
    return any(c.get("cmd") == "blpop" for c in deployment.node(deployment.primary_port).client_list())


def accepted(r: httpx.Response) -> httpx.Response | None:
    if r.status_code == 202:
        return r
    assert r.status_code in (503, 599), r.text  # the store or the queue away: retried, never a 500
    time.sleep(0.2)
    return None


def first_done(stack: LiveStack, ids: list[str]) -> dict | None:  # type: ignore[type-arg]
    for job_id in ids:
        r = httpx.get(f"{stack.url}/v1/evaluations/{job_id}", timeout=30)
        if r.status_code == 200 and r.json()["state"] == "done":
            return r.json()
    return None


def first_write_after(deployment: SentinelDeployment, since: float) -> float:
    """Seconds from `since` to the first write accepted by whatever primary the sentinels name."""
    probe = connect(
        Settings(redis_url=deployment.url), redis.Redis, socket_timeout=1, socket_connect_timeout=1
    )

    def writes() -> bool:
        try:
            return bool(probe.set("evalsvc:failover-probe", "1"))
        except redis.RedisError:
            return False

    wait_until(writes, 120, "a write through Sentinel after the kill", interval=0.05)
    return time.monotonic() - since


def wait_done(stack: LiveStack, job_id: str) -> dict | None:  # type: ignore[type-arg]
    """The evaluation's document once done; None if the store no longer knows it (a lost evaluation)."""

    def done() -> tuple[dict | None] | None:  # type: ignore[type-arg]
        try:
            r = httpx.get(f"{stack.url}/v1/evaluations/{job_id}", params={"wait": 10}, timeout=30)
        except httpx.HTTPError:
            return None
        if r.status_code == 404:
            return (None,)
        assert r.status_code in (200, 503), r.text  # the store away: asked again, never a 500
        return (r.json(),) if r.status_code == 200 and r.json()["state"] == "done" else None

    return wait_until(done, 300, f"evaluation {job_id} to end", interval=0.2)[0]
