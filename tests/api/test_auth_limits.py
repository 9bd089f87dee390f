"""Who may call, how often, how much: 401, 429 (rate, quota), 503 (backpressure, Redis down)."""

from __future__ import annotations

import logging
import time

import pytest

from evalsvc.api.auth import Authenticator
from tests.api.conftest import (
    AUTH_A,
    AUTH_B,
    KEYS,
    Gateway,
    GatewayFactory,
    assert_problem,
    free_port,
    register,
    solution,
)


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer nope"}, {"X-API-Key": "key-a "}, {"Authorization": "Basic key-a"}],
)
def test_missing_or_wrong_key(gw: Gateway, headers: dict[str, str]) -> None:
    r = gw.client.get("/v1/tasks", headers=headers)
    assert_problem(r, 401, "unauthorized")
    assert r.headers["www-authenticate"] == "Bearer"


def test_both_header_forms(gw: Gateway) -> None:
    assert gw.client.get("/v1/tasks", headers=AUTH_A).status_code == 200
    assert gw.client.get("/v1/tasks", headers=AUTH_B).status_code == 200


def test_authenticator_maps_keys_to_tenants() -> None:
    auth = Authenticator(KEYS)
    principal = auth.authenticate("key-b", "1.2.3.4")
    assert principal is not None and principal.tenant == "tenant-b" and "key-b" not in principal.key_id
    assert auth.authenticate("key-c", "1.2.3.4") is None
    assert Authenticator({}).authenticate(None, "1.2.3.4").tenant == "anonymous"  # type: ignore[union-attr]


def test_auth_off_is_anonymous(make_gateway: GatewayFactory, task_id: str) -> None:
    gw = make_gateway(api_keys={})
    assert register(gw, {}) == task_id  # tenant A's task is not the operator's: registered again, shared
    r = gw.client.post("/v1/evaluations", json={"task_id": task_id, "solution": solution()})
    assert r.status_code == 202
    assert gw.records.jobs.get_job(r.json()["id"]).tenant == "anonymous"  # type: ignore[union-attr]


def test_rate_limit(make_gateway: GatewayFactory) -> None:
    gw = make_gateway(rate_limit_per_s=0.5, rate_burst=2)
    codes = [gw.client.get("/v1/tasks", headers=AUTH_A).status_code for _ in range(2)]
    assert codes == [200, 200]
    r = gw.client.get("/v1/tasks", headers=AUTH_A)
    assert_problem(r, 429, "rate_limited")
    assert 1 <= int(r.headers["retry-after"]) <= 2
    assert gw.client.get("/v1/tasks", headers=AUTH_B).status_code == 200  # buckets are per key


def test_rate_limit_bucket_refills(make_gateway: GatewayFactory) -> None:
    gw = make_gateway(rate_limit_per_s=5, rate_burst=1)
    assert gw.client.get("/v1/tasks", headers=AUTH_A).status_code == 200
    assert_problem(gw.client.get("/v1/tasks", headers=AUTH_A), 429, "rate_limited")
    time.sleep(0.3)
    assert gw.client.get("/v1/tasks", headers=AUTH_A).status_code == 200


def test_auth_off_is_announced_loudly(make_gateway: GatewayFactory, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="evalsvc.api"):
        make_gateway(api_keys={})
    assert any("AUTHENTICATION IS OFF" in r.getMessage() for r in caplog.records)


def test_tenant_quota(make_gateway: GatewayFactory, task_id: str) -> None:
    gw = make_gateway(max_inflight_per_tenant=2)
    for n in range(2):
        body = {"task_id": task_id, "solution": solution(n)}
        assert gw.client.post("/v1/evaluations", json=body, headers=AUTH_A).status_code == 202
    r = gw.client.post("/v1/evaluations", json={"task_id": task_id, "solution": solution(9)}, headers=AUTH_A)
    assert_problem(r, 429, "tenant_quota")
    assert int(r.headers["retry-after"]) >= 1
    other = {"task_id": register(gw, AUTH_B), "solution": solution(9)}
    assert gw.client.post("/v1/evaluations", json=other, headers=AUTH_B).status_code == 202
    job = gw.records.jobs.get_job(gw.enqueuer.job_ids[0])
    assert job is not None and gw.records.jobs.finish(job)
    again = gw.client.post("/v1/evaluations", json=other, headers=AUTH_A)
    assert again.status_code == 202


def test_queue_past_its_bound(make_gateway: GatewayFactory, task_id: str) -> None:
    gw = make_gateway(max_queue_depth=3)
    gw.records.r.rpush("compile", *[b"m"] * 3)
    body = {"task_id": task_id, "solution": solution()}
    r = gw.client.post("/v1/evaluations", json=body, headers=AUTH_A)
    assert_problem(r, 503, "queue_full")
    assert int(r.headers["retry-after"]) >= 1
    assert gw.client.get(f"/v1/tasks/{task_id}", headers=AUTH_A).status_code == 200  # reads still work
    gw.records.r.lpop("compile")
    assert gw.client.post("/v1/evaluations", json=body, headers=AUTH_A).status_code == 202


@pytest.mark.parametrize("rate", [0.0, 100.0])
def test_redis_down_is_503_not_500(make_gateway: GatewayFactory, rate: float) -> None:
    gw = make_gateway(redis_url=f"redis://127.0.0.1:{free_port()}/0", rate_limit_per_s=rate)
    started = time.monotonic()
    for r in (
        gw.client.get("/v1/tasks", headers=AUTH_A),
        gw.client.post("/v1/evaluations", json={"task_id": "t_x", "solution": solution()}, headers=AUTH_A),
    ):
        assert_problem(r, 503, "store_unavailable")
        assert int(r.headers["retry-after"]) >= 1
    assert time.monotonic() - started < 10
    assert gw.client.get("/livez").status_code == 200
    ready = gw.client.get("/readyz")
    assert ready.status_code == 503 and ready.json()["missing"] == ["redis"]


def test_other_tenants_jobs_are_not_found(gw: Gateway, task_id: str) -> None:
    r = gw.client.post("/v1/evaluations", json={"task_id": task_id, "solution": solution()}, headers=AUTH_A)
    job_id = r.json()["id"]
    assert gw.client.get(f"/v1/evaluations/{job_id}", headers=AUTH_A).status_code == 200
    assert_problem(gw.client.get(f"/v1/evaluations/{job_id}", headers=AUTH_B), 404, "not_found")
    # and the same work by another tenant (which registered the same task) is its own job
    assert register(gw, AUTH_B) == task_id
    r_b = gw.client.post("/v1/evaluations", json={"task_id": task_id, "solution": solution()}, headers=AUTH_B)
    assert r_b.json()["id"] != job_id and r_b.json()["deduplicated"] is False
