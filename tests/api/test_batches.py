"""Batches: bounded, ordered, idempotent, long-pollable."""

from __future__ import annotations

import threading
import time

from tests.api.conftest import AUTH_A, AUTH_B, Gateway, GatewayFactory, assert_problem, solution
from tests.api.test_evaluations import finish_later, ok_result


def batch(task_id: str, n: int) -> dict:
    return {"evaluations": [{"task_id": task_id, "solution": solution(i)} for i in range(n)]}


def test_batch_over_the_limit(make_gateway: GatewayFactory, task_id: str) -> None:
    gw = make_gateway(max_batch=3)
    body = assert_problem(
        gw.client.post("/v1/batches", json=batch(task_id, 4), headers=AUTH_A), 413, "batch_too_large"
    )
    assert "at most 3" in body["detail"]
    assert gw.enqueuer.job_ids == []
    assert_problem(
        gw.client.post("/v1/batches", json={"evaluations": []}, headers=AUTH_A), 422, "validation_error"
    )


def test_batch_ids_in_submission_order(gw: Gateway, task_id: str) -> None:
    body = batch(task_id, 5)
    body["evaluations"].append(body["evaluations"][1])  # a duplicate shares its job
    r = gw.client.post("/v1/batches", json=body, headers=AUTH_A)
    assert r.status_code == 202
    view = r.json()
    ids = [item["id"] for item in view["items"]]
    assert view["total"] == 6 and view["done"] == 0 and ids[5] == ids[1]
    assert gw.enqueuer.job_ids == ids[:5]
    for i, job_id in enumerate(ids[:5]):
        job = gw.records.jobs.get_job(job_id)
        assert job is not None and job.solution.files["solution.py"].endswith(f"# variant {i}\n")
    got = gw.client.get(f"/v1/batches/{view['id']}", headers=AUTH_A).json()
    assert [item["id"] for item in got["items"]] == ids
    assert_problem(gw.client.get(f"/v1/batches/{view['id']}", headers=AUTH_B), 404, "not_found")


def test_batch_with_an_unknown_task_creates_nothing(gw: Gateway, task_id: str) -> None:
    body = batch(task_id, 3)
    body["evaluations"][2]["task_id"] = "t_missing"
    problem = assert_problem(gw.client.post("/v1/batches", json=body, headers=AUTH_A), 422, "unknown_task")
    assert "evaluations[2]" in problem["detail"]
    assert gw.enqueuer.job_ids == []


def test_batch_quota_counts_every_item(make_gateway: GatewayFactory, task_id: str) -> None:
    gw = make_gateway(max_inflight_per_tenant=4)
    assert_problem(gw.client.post("/v1/batches", json=batch(task_id, 5), headers=AUTH_A), 429, "tenant_quota")
    assert gw.client.post("/v1/batches", json=batch(task_id, 4), headers=AUTH_A).status_code == 202


def test_batch_idempotency_key(gw: Gateway, task_id: str) -> None:
    headers = {**AUTH_A, "Idempotency-Key": "epoch-7"}
    first = gw.client.post("/v1/batches", json=batch(task_id, 3), headers=headers).json()
    again = gw.client.post("/v1/batches", json=batch(task_id, 3), headers=headers).json()
    assert again == first and len(gw.enqueuer.job_ids) == 3
    assert_problem(
        gw.client.post("/v1/batches", json=batch(task_id, 2), headers=headers), 422, "idempotency_key_reused"
    )


def test_batch_wait_returns_when_all_are_done(gw: Gateway, task_id: str) -> None:
    view = gw.client.post("/v1/batches", json=batch(task_id, 3), headers=AUTH_A).json()
    ids = [item["id"] for item in view["items"]]
    jobs = gw.records.jobs
    finishers = [finish_later(jobs, job_id, 0.1 + 0.1 * i, ok_result()) for i, job_id in enumerate(ids)]
    started = time.monotonic()
    got = gw.client.get(f"/v1/batches/{view['id']}", params={"wait": 20}, headers=AUTH_A).json()
    elapsed = time.monotonic() - started
    for f in finishers:
        f.join()
    assert got["done"] == 3 and [item["reward"] for item in got["items"]] == [1.0, 1.0, 1.0]
    assert elapsed < 5, elapsed


def test_long_polls_do_not_block_other_requests(gw: Gateway, task_id: str) -> None:
    job_id = gw.client.post(
        "/v1/evaluations", json={"task_id": task_id, "solution": solution()}, headers=AUTH_A
    ).json()["id"]
    pollers = [
        threading.Thread(
            target=gw.client.get,
            args=(f"/v1/evaluations/{job_id}",),
            kwargs={"params": {"wait": 2}, "headers": AUTH_A},
        )
        for _ in range(3)
    ]
    for p in pollers:
        p.start()
    time.sleep(0.2)
    started = time.monotonic()
    assert gw.client.get("/v1/tasks", headers=AUTH_A).status_code == 200
    assert time.monotonic() - started < 1
    for p in pollers:
        p.join()
