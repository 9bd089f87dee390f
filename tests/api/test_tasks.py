"""Task registration: content-addressed, idempotent, syntax-checked."""

from __future__ import annotations

import pytest

from tests.api.conftest import AUTH_A, AUTH_B, SOLUTION, TASK_SOURCE, Gateway, assert_problem


def test_registration_is_idempotent(gw: Gateway) -> None:
    body = {"source": TASK_SOURCE, "meta": {"atol": 0.001}}
    first = gw.client.post("/v1/tasks", json=body, headers=AUTH_A)
    again = gw.client.post("/v1/tasks", json=body, headers=AUTH_A)
    other_tenant = gw.client.post("/v1/tasks", json=body, headers=AUTH_B)  # new to B (test_tenancy.py)
    assert (first.status_code, again.status_code, other_tenant.status_code) == (201, 200, 201)
    assert first.json()["id"] == again.json()["id"] == other_tenant.json()["id"]
    assert first.headers["location"] == f"/v1/tasks/{first.json()['id']}"
    other_meta = gw.client.post("/v1/tasks", json={"source": TASK_SOURCE}, headers=AUTH_A)
    assert other_meta.status_code == 201 and other_meta.json()["id"] != first.json()["id"]


def test_get_and_list(gw: Gateway, task_id: str) -> None:
    got = gw.client.get(f"/v1/tasks/{task_id}", headers=AUTH_A)
    assert got.status_code == 200 and got.json()["name"] == "relu"
    page = gw.client.get("/v1/tasks", params={"limit": 1}, headers=AUTH_A).json()
    assert [t["id"] for t in page["items"]] == [task_id] and page["next_offset"] == 1
    rest = gw.client.get("/v1/tasks", params={"offset": 1}, headers=AUTH_A).json()
    assert rest["items"] == [] and rest["next_offset"] is None


def test_unknown_task_is_404_problem(gw: Gateway) -> None:
    body = assert_problem(gw.client.get("/v1/tasks/t_nope", headers=AUTH_A), 404, "not_found")
    assert body["instance"] == "/v1/tasks/t_nope"


def test_syntax_and_interface_checked(gw: Gateway) -> None:
    bad = gw.client.post("/v1/tasks", json={"source": "def broken(:\n"}, headers=AUTH_A)
    assert "syntax error" in assert_problem(bad, 422, "invalid_task")["detail"]
    partial = gw.client.post("/v1/tasks", json={"source": "class Model: pass\n"}, headers=AUTH_A)
    assert "get_inputs" in assert_problem(partial, 422, "invalid_task")["detail"]


@pytest.mark.parametrize(
    "source",
    ["x = " + "+".join(["1"] * 200_000) + "\n", "-" * 200_000 + "1\n"],
    ids=["200k-term expression", "200k unary minus"],
)
def test_a_source_past_the_parsers_limits_is_a_422(gw: Gateway, source: str) -> None:
    """A RecursionError or MemoryError from parsing was a 500 (or a reset connection)."""
    for path, body in (("/v1/tasks", {"source": source}), ("/v1/evaluations", {"task": {"source": source}})):
        if path == "/v1/evaluations":
            body["solution"] = SOLUTION
        r = gw.client.post(path, json=body, headers=AUTH_A)
        assert "parser limits" in assert_problem(r, 422, "invalid_task")["detail"], r.text
