"""POST /v1/compile waits for the compile report: 200 when done in time, 202 with an id otherwise."""

from __future__ import annotations

import threading
import time

from evalsvc.core.results import CompileReport
from evalsvc.records.documents import JobKind
from evalsvc.records.jobs import JobStore
from tests.api.conftest import AUTH_A, AUTH_B, Gateway, assert_problem, solution


def finish_compile_later(store: JobStore, enqueued: list[str], delay_s: float) -> threading.Thread:
    def run() -> None:
        deadline = time.monotonic() + 5
        while not enqueued and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(delay_s)
        job = store.get_job(enqueued[-1])
        assert job is not None and job.kind is JobKind.COMPILE
        store.finish(job, report=CompileReport(ok=True, cached=True, duration_s=0.2))

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_compile_answers_200_when_done_in_time(gw: Gateway) -> None:
    finisher = finish_compile_later(gw.records.jobs, gw.enqueuer.job_ids, 0.2)
    r = gw.client.post("/v1/compile", params={"wait": 20}, json={"solution": solution()}, headers=AUTH_A)
    finisher.join()
    assert r.status_code == 200, r.text
    view = r.json()
    assert view["state"] == "done" and view["status"] == "ok" and view["report"]["cached"] is True
    assert gw.client.get(f"/v1/compile/{view['id']}", headers=AUTH_A).json() == view
    # identical source: served from the finished job at once
    again = gw.client.post("/v1/compile", json={"solution": solution()}, headers=AUTH_A)
    assert again.status_code == 200 and again.json()["id"] == view["id"]


def test_compile_answers_202_while_running(gw: Gateway) -> None:
    r = gw.client.post("/v1/compile", params={"wait": 0.2}, json={"solution": solution()}, headers=AUTH_A)
    assert r.status_code == 202 and r.json()["state"] == "queued"
    compile_id = r.json()["id"]
    assert r.headers["location"] == f"/v1/compile/{compile_id}"
    assert gw.client.get(f"/v1/compile/{compile_id}", headers=AUTH_A).status_code == 200
    assert_problem(gw.client.get(f"/v1/compile/{compile_id}", headers=AUTH_B), 404, "not_found")
    assert_problem(gw.client.get(f"/v1/evaluations/{compile_id}", headers=AUTH_A), 404, "not_found")


def test_compile_idempotency_key(gw: Gateway) -> None:
    headers = {**AUTH_A, "Idempotency-Key": "c1"}
    a = gw.client.post("/v1/compile", params={"wait": 0}, json={"solution": solution()}, headers=headers)
    b = gw.client.post("/v1/compile", params={"wait": 0}, json={"solution": solution()}, headers=headers)
    assert a.json()["id"] == b.json()["id"] and len(gw.enqueuer.job_ids) == 1
