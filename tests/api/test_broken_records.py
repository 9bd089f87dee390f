"""A job whose stored record no longer reads as a job (corrupt JSON, fields missing, values the models now
refuse) is answered for, never with a 500 (issue 20, item 4): every GET shows it ended `internal_error`,
failure `record_unreadable`, with the reason; a retry makes a fresh job."""

from __future__ import annotations

import json

import redis

from tests.api.conftest import AUTH_A, AUTH_B, Gateway, assert_problem, solution

KEY = "evalsvc:job:"


def submitted(gw: Gateway, task_id: str, n: int, headers: dict[str, str] | None = None) -> str:
    body = {"task_id": task_id, "solution": solution(n)}
    r = gw.client.post("/v1/evaluations", json=body, headers={**AUTH_A, **(headers or {})})
    assert r.status_code == 202, r.text
    return r.json()["id"]


def spoil_options(raw: redis.Redis, job_id: str) -> None:
    doc = json.loads(raw.hget(KEY + job_id, "doc"))  # type: ignore[arg-type]
    doc["options"]["timing_budget_s"] = -1
    raw.hset(KEY + job_id, "doc", json.dumps(doc))


def tear(raw: redis.Redis, job_id: str, keep: int | None = None) -> None:
    doc: bytes = raw.hget(KEY + job_id, "doc")  # type: ignore[assignment]
    raw.hset(KEY + job_id, "doc", doc[: keep if keep is not None else len(doc) - 20])


def assert_failed_unreadable(view: dict, why: str) -> None:
    assert view["state"] == "done" and view["status"] == "internal_error", view
    assert view["reward"] == -1
    assert view["result"]["failure"] == "record_unreadable"
    assert "could not be read" in view["result"]["message"] and why in view["result"]["message"], view


def test_get_of_an_unreadable_evaluation_is_a_failed_result(gw: Gateway, task_id: str) -> None:
    spoilt, torn = submitted(gw, task_id, 1), submitted(gw, task_id, 2)
    spoil_options(gw.records.r, spoilt)
    tear(gw.records.r, torn)
    assert gw.records.jobs.inflight("tenant-a") == 2
    for job_id, why in ((spoilt, "options.timing_budget_s"), (torn, "Invalid JSON")):
        r = gw.client.get(f"/v1/evaluations/{job_id}", params={"wait": 5}, headers=AUTH_A)
        assert r.status_code == 200, r.text
        assert_failed_unreadable(r.json(), why)
        assert r.json()["id"] == job_id and r.json()["created_at"] > 0
        text = gw.client.get(f"/v1/evaluations/{job_id}", params={"format": "text"}, headers=AUTH_A)
        assert text.status_code == 200 and "status: internal_error" in text.text, text.text
        assert_problem(gw.client.get(f"/v1/evaluations/{job_id}", headers=AUTH_B), 404, "not_found")
    assert gw.records.jobs.inflight("tenant-a") == 0  # failed once read: the quota is given back


def test_an_unreadable_record_whose_owner_is_lost_is_nobodys(gw: Gateway, task_id: str) -> None:
    job_id = submitted(gw, task_id, 1)
    tear(gw.records.r, job_id, keep=40)
    assert_problem(gw.client.get(f"/v1/evaluations/{job_id}", headers=AUTH_A), 404, "not_found")
    gw.records.r.delete(KEY + job_id)
    gw.records.r.set(KEY + job_id, "another type of key")
    assert_problem(gw.client.get(f"/v1/evaluations/{job_id}", headers=AUTH_A), 404, "not_found")


def test_a_batch_with_an_unreadable_item(gw: Gateway, task_id: str) -> None:
    items = [{"task_id": task_id, "solution": solution(n)} for n in range(3)]
    r = gw.client.post("/v1/batches", json={"evaluations": items}, headers={**AUTH_A, "Idempotency-Key": "b"})
    assert r.status_code == 202, r.text
    batch = r.json()
    ids = [i["id"] for i in batch["items"]]
    spoil_options(gw.records.r, ids[1])
    tear(gw.records.r, ids[2], keep=40)  # its owner is lost: the other items say whose batch it is
    got = gw.client.get(f"/v1/batches/{batch['id']}", headers=AUTH_A)
    assert got.status_code == 200, got.text
    assert [(i["state"], i["status"]) for i in got.json()["items"]] == [
        ("queued", None),
        ("done", "internal_error"),
        ("done", "internal_error"),
    ]
    assert got.json()["done"] == 2
    assert_problem(gw.client.get(f"/v1/batches/{batch['id']}", headers=AUTH_B), 404, "not_found")
    again = gw.client.post(
        "/v1/batches", json={"evaluations": items}, headers={**AUTH_A, "Idempotency-Key": "b"}
    )
    assert again.status_code == 202 and again.json()["id"] == batch["id"], again.text


def test_a_retry_of_an_unreadable_evaluation_gets_a_fresh_job(gw: Gateway, task_id: str) -> None:
    """Neither its Idempotency-Key nor its content serves an unreadable record again."""
    keyed = submitted(gw, task_id, 1, {"Idempotency-Key": "k1"})
    plain = submitted(gw, task_id, 2)
    spoil_options(gw.records.r, keyed)
    tear(gw.records.r, plain)
    retried = submitted(gw, task_id, 1, {"Idempotency-Key": "k1"})
    deduplicated = submitted(gw, task_id, 2)
    assert retried != keyed and deduplicated != plain
    assert gw.enqueuer.job_ids == [keyed, plain, retried, deduplicated]
    view = gw.client.get(f"/v1/evaluations/{keyed}", headers=AUTH_A).json()
    assert_failed_unreadable(view, "options.timing_budget_s")
    assert submitted(gw, task_id, 1, {"Idempotency-Key": "k1"}) == retried  # the fresh job now answers


def test_get_of_an_unreadable_compile_job(gw: Gateway) -> None:
    r = gw.client.post("/v1/compile", json={"solution": solution(1)}, params={"wait": 0}, headers=AUTH_A)
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    tear(gw.records.r, job_id)
    got = gw.client.get(f"/v1/compile/{job_id}", headers=AUTH_A)
    assert got.status_code == 200, got.text
    assert got.json()["state"] == "done" and got.json()["status"] == "internal_error"
    assert "could not be read" in got.json()["message"]
