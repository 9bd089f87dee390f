"""Retention: a finished result is kept for `retention_s`, then it and its dedup key expire (a repeat
is evaluated afresh). Against a real redis-server; the gateway's own store writes the jobs."""

from __future__ import annotations

import time

import redis

from evalsvc.core.results import EvaluationResult, Status
from evalsvc.records.jobs import JobStore
from evalsvc.records.keys import P
from tests.api.conftest import (  # noqa: F401 - fixtures
    AUTH_A,
    TASK_SOURCE,
    GatewayFactory,
    make_gateway,
    redis_server,
    redis_url,
    solution,
)


def test_results_expire_after_the_retention(make_gateway: GatewayFactory, redis_url: str) -> None:  # noqa: F811
    gw = make_gateway(retention_s=2)
    task = gw.client.post("/v1/tasks", json={"source": TASK_SOURCE}, headers=AUTH_A).json()["id"]
    body = {"task_id": task, "solution": solution(1)}
    job_id = gw.client.post("/v1/evaluations", json=body, headers=AUTH_A).json()["id"]
    store = JobStore(redis.Redis.from_url(redis_url), retention_s=2)  # what a worker holds
    job = store.get_job(job_id)
    assert job is not None and store.finish(job, EvaluationResult(status=Status.OK, reward=1.0))
    assert gw.client.get(f"/v1/evaluations/{job_id}", headers=AUTH_A).json()["state"] == "done"
    assert 0 < store.r.ttl(P + "job:" + job_id) <= 2
    time.sleep(3)
    gone = gw.client.get(f"/v1/evaluations/{job_id}", headers=AUTH_A)
    assert gone.status_code == 404 and gone.json()["code"] == "not_found"
    again = gw.client.post("/v1/evaluations", json=body, headers=AUTH_A)
    assert again.status_code == 202 and again.json()["id"] != job_id  # evaluated afresh, not served
    store.r.close()
