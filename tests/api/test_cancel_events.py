"""Cancel (DELETE) and push (server-sent events of a batch) against the real gateway and a real Redis.

Jobs are finished here as a worker would (`JobStore.finish`); the Celery path is in
tests/integration/test_cancel_e2e.py. Nothing here waits on a clock: each stream is read until the
events the test caused have arrived."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import redis

from evalsvc.api.app import create_app
from evalsvc.api.enqueue import RecordingEnqueuer
from evalsvc.core.results import Status
from evalsvc.records.documents import State
from evalsvc.records.jobs import JobStore
from evalsvc.records.keys import job_key
from evalsvc.sdk import ApiError, AsyncClient, Client
from evalsvc.settings import Settings
from tests.api.conftest import (
    AUTH_A,
    AUTH_B,
    KEYS,
    TASK_SOURCE,
    Gateway,
    assert_problem,
    served,
    solution,
)
from tests.api.test_evaluations import ok_result


def submit(gw: Gateway, task_id: str, n: int = 0, headers: dict[str, str] | None = None) -> dict:
    body = {"task_id": task_id, "solution": solution(n)}
    r = gw.client.post("/v1/evaluations", json=body, headers=headers or AUTH_A)
    assert r.status_code == 202, r.text
    return r.json()


def finish_ok(store: JobStore, job_id: str) -> bool:
    job = store.get_job(job_id)
    assert job is not None
    return store.finish(job, ok_result())


def test_cancel_a_queued_evaluation(gw: Gateway, task_id: str) -> None:
    view = submit(gw, task_id)
    assert gw.records.jobs.inflight("tenant-a") == 1
    assert_problem(gw.client.delete(f"/v1/evaluations/{view['id']}", headers=AUTH_B), 404, "not_found")
    r = gw.client.delete(f"/v1/evaluations/{view['id']}", headers=AUTH_A)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["state"] == "done" and got["status"] == "cancelled" and got["reward"] is None
    assert got["result"]["reward"] is None and got["result"]["milestone"] is None
    assert gw.records.jobs.inflight("tenant-a") == 0  # the quota is given back
    # idempotent: the same answer again
    again = gw.client.delete(f"/v1/evaluations/{view['id']}", headers=AUTH_A)
    assert again.status_code == 200 and again.json()["result"] == got["result"]
    # a worker's result that comes later is refused: the cancellation stands, no reward is given
    assert not finish_ok(gw.records.jobs, view["id"])
    read = gw.client.get(f"/v1/evaluations/{view['id']}", headers=AUTH_A).json()
    assert read["status"] == "cancelled" and read["reward"] is None
    assert "reward: none" in gw.client.get(f"/v1/evaluations/{view['id']}?format=text", headers=AUTH_A).text


def test_a_cancelled_job_serves_its_key_but_not_new_work(gw: Gateway, task_id: str) -> None:
    keyed = {**AUTH_A, "Idempotency-Key": "try-1"}
    view = submit(gw, task_id, headers=keyed)
    gw.client.delete(f"/v1/evaluations/{view['id']}", headers=AUTH_A)
    replay = submit(gw, task_id, headers=keyed)
    assert replay["id"] == view["id"] and replay["status"] == "cancelled"
    fresh = submit(gw, task_id)  # same content, no key: new work, not someone's cancellation
    assert fresh["id"] != view["id"] and fresh["state"] == "queued" and not fresh["deduplicated"]


def test_cancel_a_finished_evaluation_is_409(gw: Gateway, task_id: str) -> None:
    view = submit(gw, task_id)
    assert finish_ok(gw.records.jobs, view["id"])
    problem = assert_problem(
        gw.client.delete(f"/v1/evaluations/{view['id']}", headers=AUTH_A), 409, "already_finished"
    )
    assert problem["result_status"] == "ok" and "ok" in problem["detail"]
    assert gw.client.get(f"/v1/evaluations/{view['id']}", headers=AUTH_A).json()["reward"] == 1.0


def test_cancel_a_running_evaluation(gw: Gateway, task_id: str) -> None:
    """A worker's save (the job moving to `running`) between the gateway's read and its write is seen."""
    view = submit(gw, task_id)
    job = gw.records.jobs.get_job(view["id"])
    assert job is not None and gw.records.jobs.advance(job, State.RUNNING)
    got = gw.client.delete(f"/v1/evaluations/{view['id']}", headers=AUTH_A).json()
    assert got["status"] == "cancelled"
    assert not gw.records.jobs.advance(job, State.RUNNING)  # the worker's next step is refused
    assert not gw.records.jobs.finish(job, ok_result())  # and its result
    metrics = gw.client.get("/metrics").text
    assert 'evalsvc_cancellations_total{state="running"} 1.0' in metrics


def test_cancel_a_batch(gw: Gateway, task_id: str) -> None:
    body = {"evaluations": [{"task_id": task_id, "solution": solution(i)} for i in range(3)]}
    body["evaluations"].append(body["evaluations"][1])  # a duplicate shares item 1's job
    batch = gw.client.post("/v1/batches", json=body, headers=AUTH_A).json()
    ids = [item["id"] for item in batch["items"]]
    assert finish_ok(gw.records.jobs, ids[0])
    assert_problem(gw.client.delete(f"/v1/batches/{batch['id']}", headers=AUTH_B), 404, "not_found")
    r = gw.client.delete(f"/v1/batches/{batch['id']}", headers=AUTH_A)
    assert r.status_code == 200, r.text
    got = r.json()
    assert (got["total"], got["cancelled"], got["already_cancelled"], got["finished"]) == (4, 3, 0, 1)
    assert [i["status"] for i in got["batch"]["items"]] == ["ok", "cancelled", "cancelled", "cancelled"]
    assert got["batch"]["done"] == 4
    again = gw.client.delete(f"/v1/batches/{batch['id']}", headers=AUTH_A).json()
    assert (again["cancelled"], again["already_cancelled"], again["finished"]) == (0, 3, 1)
    assert gw.records.jobs.inflight("tenant-a") == 0


# server-sent events ------------------------------------------------------------------------------------


@pytest.fixture
def live(redis_url: str) -> Iterator[tuple[str, JobStore]]:
    """The gateway under a real uvicorn (a stream needs a real server), heartbeats every 0.2 s."""
    settings = Settings(redis_url=redis_url, api_keys=KEYS, rate_limit_per_s=0, event_heartbeat_s=0.2)
    raw = redis.Redis.from_url(redis_url)
    with served(create_app(settings, enqueuer=RecordingEnqueuer())) as url:
        yield url, JobStore(raw)
    raw.close()


def _batch(url: str, n: int) -> tuple[str, list[str]]:
    """A batch of `n` distinct evaluations of tenant A; their ids."""
    with httpx.Client(base_url=url, headers=AUTH_A) as http:
        task = http.post("/v1/tasks", json={"source": TASK_SOURCE, "name": "relu"}).json()["id"]
        body = {"evaluations": [{"task_id": task, "solution": solution(i)} for i in range(n)]}
        view = http.post("/v1/batches", json=body).json()
    return view["id"], [item["id"] for item in view["items"]]


def test_events_push_every_result_then_done_and_resume(live: tuple[str, JobStore]) -> None:
    url, store = live
    with Client(url, api_key="key-a") as client:
        batch_id, ids = _batch(url, 3)
        assert finish_ok(store, ids[0])  # done before the stream opens: sent first
        stream = client.stream_batch(batch_id)
        first = next(stream)
        assert first.kind == "result" and first.result is not None and first.result.index == 0
        assert first.result.item.status is Status.OK and first.result.href == f"/v1/evaluations/{ids[0]}"

        # the rest end while the stream is open: one by a worker, one cancelled
        def finish_rest() -> None:
            finish_ok(store, ids[2])
            client.cancel(ids[1])

        threading.Thread(target=finish_rest).start()
        rest = list(stream)
    assert [e.kind for e in rest] == ["result", "result", "done"]
    got = {e.result.index: e.result.item.status for e in rest[:2] if e.result is not None}
    assert got == {1: Status.CANCELLED, 2: Status.OK}
    summary = rest[-1].summary
    assert summary is not None and summary.total == summary.done == 3
    assert summary.statuses == {"ok": 2, "cancelled": 1}

    with Client(url, api_key="key-a") as client:
        resumed = list(client.stream_batch(batch_id, last_event_id=first.cursor))
        assert sorted(e.result.index for e in resumed if e.result is not None) == [1, 2]
        assert resumed[-1].kind == "done"
        # resumed from the last event: nothing but `done`
        assert [e.kind for e in client.stream_batch(batch_id, last_event_id=rest[-2].cursor)] == ["done"]


def test_events_heartbeat_and_a_lost_notification(live: tuple[str, JobStore]) -> None:
    """While nothing ends the stream sends keep-alive comments; a result written without its notification
    (lost pub/sub message) is found by the re-read that goes with them."""
    url, store = live
    batch_id, ids = _batch(url, 1)
    with (
        httpx.Client(base_url=url, headers=AUTH_A, timeout=30) as http,
        http.stream("GET", f"/v1/batches/{batch_id}/events") as resp,
    ):
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        lines = resp.iter_lines()
        while next(lines) != ": keep-alive":
            pass
        job = store.get_job(ids[0])
        assert job is not None
        job.state, job.result = State.DONE, ok_result()
        store.r.hset(job_key(ids[0]), mapping={"doc": job.model_dump_json(), "state": "done"})
        events = [line for line in lines if line.startswith("event:") or line.startswith("data:")]
    assert events[0] == "event: result" and json.loads(events[1][5:])["item"]["status"] == "ok"
    assert events[2] == "event: done"


def test_events_are_the_tenants_own(live: tuple[str, JobStore]) -> None:
    url, _ = live
    batch_id, _ids = _batch(url, 2)
    with httpx.Client(base_url=url, timeout=30) as http:
        assert_problem(http.get(f"/v1/batches/{batch_id}/events", headers=AUTH_B), 404, "not_found")
        assert_problem(http.get("/v1/batches/b_nope/events", headers=AUTH_A), 404, "not_found")
        bad = {**AUTH_A, "Last-Event-ID": "not-a-cursor"}
        assert_problem(http.get(f"/v1/batches/{batch_id}/events", headers=bad), 400, "bad_last_event_id")
        too_long = {**AUTH_A, "Last-Event-ID": "AAAA"}  # a cursor of another batch's size
        assert_problem(http.get(f"/v1/batches/{batch_id}/events", headers=too_long), 400, "bad_last_event_id")


def test_sdk_cancel_of_a_finished_evaluation_raises_409(live: tuple[str, JobStore]) -> None:
    url, store = live
    _batch_id, ids = _batch(url, 1)
    with Client(url, api_key="key-a") as client:
        assert finish_ok(store, ids[0])
        with pytest.raises(ApiError) as err:
            client.cancel(ids[0])
    assert err.value.status == 409 and err.value.code == "already_finished"


def test_a_client_hanging_up_lets_go_of_its_subscription(live: tuple[str, JobStore]) -> None:
    url, store = live
    batch_id, ids = _batch(url, 1)
    channel = "evalsvc:finished:" + ids[0]
    with (
        httpx.Client(base_url=url, headers=AUTH_A, timeout=30) as http,
        http.stream("GET", f"/v1/batches/{batch_id}/events") as resp,
    ):
        lines = resp.iter_lines()
        while next(lines) != ": keep-alive":
            pass
        assert store.r.pubsub_numsub(channel) == [(channel.encode(), 1)]
    deadline = time.monotonic() + 30  # the server notices the hang-up at its next write (a heartbeat)
    while store.r.pubsub_numsub(channel) != [(channel.encode(), 0)]:
        assert time.monotonic() < deadline, "the stream's subscription outlived its client"
        time.sleep(0.05)


def test_async_client_cancels_and_streams(live: tuple[str, JobStore]) -> None:
    url, store = live
    batch_id, ids = _batch(url, 2)
    assert finish_ok(store, ids[0])

    async def run() -> tuple[list[str], int]:
        async with AsyncClient(url, api_key="key-a") as client:
            cancelled = await client.cancel_batch(batch_id)
            kinds = [e.kind async for e in client.stream_batch(batch_id)]
            return kinds, cancelled.cancelled

    kinds, n = asyncio.run(run())
    assert n == 1 and kinds == ["result", "result", "done"]
