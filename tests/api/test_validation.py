"""Bad input is always a 4xx problem, never a 500: JSON, types, paths, sizes, routes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import httpx
import pytest

from evalsvc.api.app import create_app
from evalsvc.api.body_limit import BodyLimitMiddleware
from evalsvc.api.enqueue import RecordingEnqueuer
from evalsvc.settings import Settings
from tests.api.conftest import (
    AUTH_A,
    KEYS,
    SOLUTION,
    Gateway,
    GatewayFactory,
    assert_problem,
    served,
)


def test_malformed_json(gw: Gateway) -> None:
    r = gw.client.post(
        "/v1/evaluations", content=b'{"task_id": ', headers={**AUTH_A, "content-type": "application/json"}
    )
    assert_problem(r, 422, "invalid_json")


def test_wrong_types_list_the_errors(gw: Gateway) -> None:
    r = gw.client.post("/v1/evaluations", json={"task_id": 5, "solution": "x"}, headers=AUTH_A)
    body = assert_problem(r, 422, "validation_error")
    locs = [e["loc"] for e in body["errors"]]
    assert ["body", "task_id"] in locs and ["body", "solution"] in locs


def test_path_traversal_is_refused_by_name(gw: Gateway, task_id: str) -> None:
    sol = {"files": {"../x.py": "print(1)\n", "solution.py": "x = 1\n"}}
    r = gw.client.post("/v1/evaluations", json={"task_id": task_id, "solution": sol}, headers=AUTH_A)
    body = assert_problem(r, 422, "validation_error")
    assert "../x.py" in body["detail"]
    assert gw.enqueuer.job_ids == []


def test_empty_solution(gw: Gateway, task_id: str) -> None:
    for sol in ({"files": {}}, {"files": {"solution.py": "  \n"}}):
        r = gw.client.post("/v1/evaluations", json={"task_id": task_id, "solution": sol}, headers=AUTH_A)
        assert_problem(r, 422, "validation_error")


def test_task_given_twice_or_not_at_all(gw: Gateway, task_id: str) -> None:
    r = gw.client.post("/v1/evaluations", json={"solution": SOLUTION}, headers=AUTH_A)
    assert "exactly one of task_id or task" in assert_problem(r, 422, "validation_error")["detail"]


def test_unknown_task_id_in_a_submission(gw: Gateway) -> None:
    r = gw.client.post("/v1/evaluations", json={"task_id": "t_nope", "solution": SOLUTION}, headers=AUTH_A)
    assert_problem(r, 422, "unknown_task")


def test_unknown_route_and_method(gw: Gateway) -> None:
    assert_problem(gw.client.get("/v2/nothing", headers=AUTH_A), 404, "not_found")
    r = gw.client.delete("/v1/tasks", headers=AUTH_A)
    assert_problem(r, 405, "method_not_allowed")
    assert "GET" in r.headers["allow"]


def test_bad_query_and_path_params(gw: Gateway) -> None:
    assert_problem(gw.client.get("/v1/tasks?limit=0", headers=AUTH_A), 422, "validation_error")
    assert_problem(gw.client.get("/v1/evaluations/a%20b", headers=AUTH_A), 422, "validation_error")


def test_body_over_the_limit_by_content_length(make_gateway: GatewayFactory) -> None:
    gw = make_gateway(max_body_bytes=1000)
    r = gw.client.post(
        "/v1/tasks", content=b"x" * 1001, headers={**AUTH_A, "content-type": "application/json"}
    )
    assert_problem(r, 413, "body_too_large")


def test_body_over_the_limit_chunked(make_gateway: GatewayFactory) -> None:
    gw = make_gateway(max_body_bytes=1000)

    def chunks() -> Iterator[bytes]:
        yield b'{"source": "'
        for _ in range(10):
            yield b"x" * 200

    r = gw.client.post("/v1/tasks", content=chunks(), headers={**AUTH_A, "content-type": "application/json"})
    assert "content-length" not in r.request.headers
    assert_problem(r, 413, "body_too_large")


def test_middleware_counts_chunks_before_the_app_sees_them() -> None:
    called = False

    async def app(scope: dict, receive: object, send: object) -> None:
        nonlocal called
        called = True

    messages = [{"type": "http.request", "body": b"x" * 600, "more_body": True}] * 3
    sent: list[dict] = []

    async def receive() -> dict:
        return messages.pop(0)

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/tasks", "headers": []}
    asyncio.run(BodyLimitMiddleware(app, max_bytes=1000)(scope, receive, send))  # type: ignore[arg-type]
    assert not called
    assert sent[0]["status"] == 413
    assert len(messages) == 1  # stopped reading at the first chunk past the limit


@pytest.fixture
def live_server(redis_url: str) -> Iterator[str]:
    """The gateway under a real uvicorn, for what only a real HTTP server does (chunked bodies)."""
    settings = Settings(redis_url=redis_url, api_keys=KEYS, rate_limit_per_s=0, max_body_bytes=1000)
    with served(create_app(settings, enqueuer=RecordingEnqueuer())) as url:
        yield url


def test_chunked_body_over_the_limit_on_a_real_server(live_server: str) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(3):
            yield b"x" * 500

    with httpx.Client(base_url=live_server) as client:
        r = client.post("/v1/tasks", content=chunks(), headers={**AUTH_A, "content-type": "application/json"})
        assert r.request.headers["transfer-encoding"] == "chunked"
        assert_problem(r, 413, "body_too_large")
        small = client.post("/v1/tasks", content=iter([b'{"source": 1}']), headers=AUTH_A)
        assert_problem(small, 422, "validation_error")


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ('{"max_speedup": 1e999}', "max_speedup"),
        ('{"schedule": {"kind": "milestone", "fail": NaN}}', "fail"),
        ('{"schedule": {"kind": "tiered", "tiers": [[-Infinity, 2]]}}', "tiers"),
        ('{"timing_budget_s": NaN}', "timing_budget_s"),
        ('{"schedule": {"kind": "continuous", "high": 1e300}}', "high"),
    ],
)
def test_non_finite_or_unbounded_options_are_refused_at_the_door(
    gw: Gateway, task_id: str, options: str, field: str
) -> None:
    """A value JSON can carry but no stage can store and read back (it was stored as null, and every GET
    of the evaluation then answered 500) is a 422 naming the field; nothing is enqueued."""
    body = f'{{"task_id": "{task_id}", "solution": {json.dumps(SOLUTION)}, "options": {options}}}'
    r = gw.client.post(
        "/v1/evaluations", content=body.encode(), headers={**AUTH_A, "content-type": "application/json"}
    )
    problem = assert_problem(r, 422, "validation_error")
    assert any(field in [str(p) for p in e["loc"]] for e in problem["errors"]), problem
    assert gw.enqueuer.job_ids == []
