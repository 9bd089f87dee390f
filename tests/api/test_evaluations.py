"""Submitting and reading evaluations: enqueue, idempotency, dedup, long-poll."""

from __future__ import annotations

import threading
import time

from evalsvc.core.options import EvalOptions
from evalsvc.core.outcomes import failure
from evalsvc.core.results import EvaluationResult, Status
from evalsvc.records.jobs import JobStore
from tests.api.conftest import AUTH_A, AUTH_B, TASK_SOURCE, Gateway, assert_problem, register, solution


def finish_later(store: JobStore, job_id: str, delay_s: float, result: EvaluationResult) -> threading.Thread:
    """Finish a job from another thread, as a worker would."""

    def run() -> None:
        time.sleep(delay_s)
        job = store.get_job(job_id)
        assert job is not None
        store.finish(job, result)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def ok_result() -> EvaluationResult:
    return EvaluationResult(status=Status.OK, correct=True, reward=1.0, milestone=1)


def test_submit_queues_the_job(gw: Gateway, task_id: str) -> None:
    r = gw.client.post("/v1/evaluations", json={"task_id": task_id, "solution": solution()}, headers=AUTH_A)
    assert r.status_code == 202
    view = r.json()
    assert view["state"] == "queued" and view["task_id"] == task_id and view["deduplicated"] is False
    assert r.headers["location"] == f"/v1/evaluations/{view['id']}"
    assert gw.enqueuer.job_ids == [view["id"]]
    job = gw.records.jobs.get_job(view["id"])
    assert job is not None and job.tenant == "tenant-a"


def test_inline_task_is_registered(gw: Gateway) -> None:
    body = {"task": {"source": TASK_SOURCE}, "solution": solution()}
    r = gw.client.post("/v1/evaluations", json=body, headers=AUTH_A)
    assert r.status_code == 202
    task_id = r.json()["task_id"]
    assert gw.client.get(f"/v1/tasks/{task_id}", headers=AUTH_A).status_code == 200
    bad = gw.client.post(
        "/v1/evaluations", json={"task": {"source": "x = 1\n"}, "solution": solution()}, headers=AUTH_A
    )
    assert_problem(bad, 422, "invalid_task")


def test_idempotency_key_gives_the_same_job(gw: Gateway, task_id: str) -> None:
    headers = {**AUTH_A, "Idempotency-Key": "attempt-1"}
    body = {"task_id": task_id, "solution": solution()}
    first = gw.client.post("/v1/evaluations", json=body, headers=headers)
    again = gw.client.post("/v1/evaluations", json=body, headers=headers)
    assert first.status_code == again.status_code == 202
    assert first.json() == again.json()
    assert gw.enqueuer.job_ids == [first.json()["id"]]
    changed = {"task_id": task_id, "solution": solution(1)}
    assert_problem(
        gw.client.post("/v1/evaluations", json=changed, headers=headers), 422, "idempotency_key_reused"
    )


def test_idempotency_key_is_scoped_per_tenant(gw: Gateway, task_id: str) -> None:
    assert register(gw, AUTH_B) == task_id
    body = {"task_id": task_id, "solution": solution()}
    a = gw.client.post("/v1/evaluations", json=body, headers={**AUTH_A, "Idempotency-Key": "k"})
    b = gw.client.post("/v1/evaluations", json=body, headers={**AUTH_B, "Idempotency-Key": "k"})
    assert a.json()["id"] != b.json()["id"]


def test_identical_submissions_are_deduplicated(gw: Gateway, task_id: str) -> None:
    body = {"task_id": task_id, "solution": solution(), "options": {"trials": 3}}
    first = gw.client.post("/v1/evaluations", json=body, headers=AUTH_A).json()
    second = gw.client.post("/v1/evaluations", json=body, headers=AUTH_A).json()
    assert second["id"] == first["id"] and second["deduplicated"] is True
    assert gw.enqueuer.job_ids == [first["id"]]
    other_options = {**body, "options": {"trials": 4}}
    assert gw.client.post("/v1/evaluations", json=other_options, headers=AUTH_A).json()["id"] != first["id"]
    # served from the finished job, result included
    job = gw.records.jobs.get_job(first["id"])
    assert job is not None and gw.records.jobs.finish(job, ok_result())
    third = gw.client.post("/v1/evaluations", json=body, headers=AUTH_A).json()
    assert third["id"] == first["id"] and third["state"] == "done" and third["reward"] == 1.0


def test_internal_errors_are_not_served_again(gw: Gateway, task_id: str) -> None:
    body = {"task_id": task_id, "solution": solution()}
    first = gw.client.post("/v1/evaluations", json=body, headers=AUTH_A).json()
    job = gw.records.jobs.get_job(first["id"])
    assert job is not None
    gw.records.jobs.finish(job, failure(Status.INTERNAL_ERROR, "worker lost", EvalOptions()))
    again = gw.client.post("/v1/evaluations", json=body, headers=AUTH_A).json()
    assert again["id"] != first["id"] and again["deduplicated"] is False


def test_get_returns_the_result_document(gw: Gateway, task_id: str) -> None:
    job_id = gw.client.post(
        "/v1/evaluations", json={"task_id": task_id, "solution": solution()}, headers=AUTH_A
    ).json()["id"]
    assert gw.client.get(f"/v1/evaluations/{job_id}", headers=AUTH_A).json()["result"] is None
    job = gw.records.jobs.get_job(job_id)
    assert job is not None and gw.records.jobs.finish(job, ok_result())
    view = gw.client.get(f"/v1/evaluations/{job_id}", headers=AUTH_A).json()
    assert view["state"] == "done" and view["status"] == "ok" and view["result"]["milestone"] == 1
    assert_problem(gw.client.get("/v1/evaluations/e_unknown", headers=AUTH_A), 404, "not_found")


def test_wait_returns_as_soon_as_the_job_is_done(gw: Gateway, task_id: str) -> None:
    job_id = gw.client.post(
        "/v1/evaluations", json={"task_id": task_id, "solution": solution()}, headers=AUTH_A
    ).json()["id"]
    finisher = finish_later(gw.records.jobs, job_id, 0.3, ok_result())
    started = time.monotonic()
    r = gw.client.get(f"/v1/evaluations/{job_id}", params={"wait": 20}, headers=AUTH_A)
    elapsed = time.monotonic() - started
    finisher.join()
    assert r.status_code == 200 and r.json()["state"] == "done"
    assert 0.25 <= elapsed < 5, elapsed


def test_wait_gives_up_at_its_limit(gw: Gateway, task_id: str) -> None:
    job_id = gw.client.post(
        "/v1/evaluations", json={"task_id": task_id, "solution": solution()}, headers=AUTH_A
    ).json()["id"]
    started = time.monotonic()
    r = gw.client.get(f"/v1/evaluations/{job_id}", params={"wait": 0.4}, headers=AUTH_A)
    assert r.json()["state"] == "queued"
    assert 0.35 <= time.monotonic() - started < 5
