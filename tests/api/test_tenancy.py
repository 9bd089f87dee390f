"""Tenants kept apart (issue 20, item 3): tasks, suites and profiles belong to the tenant that made them.

Another tenant's id answers exactly as an id that never existed (status, code, detail, all but the id),
so a tenant learns neither the content nor the existence of another's. What the operator registers with no
tenant (auth off, the CLI's imports, and every record stored before tenancy) is shared: every tenant reads
it, none writes it. Real Redis; nothing here depends on timing.
"""

from __future__ import annotations

import json
import os
import time

import httpx

from evalsvc.core.pools import Suite
from evalsvc.core.tasks import TaskSpec
from evalsvc.records.catalog import PoolStore
from evalsvc.records.documents import WorkerInfo
from tests.api.conftest import (
    AUTH_A,
    AUTH_B,
    TASK_SOURCE,
    Gateway,
    GatewayFactory,
    assert_problem,
    register,
    solution,
)

MISSING_TASK = "t_" + "0" * 32
SECRET = {"name": "alice-secret", "meta": {"atol": 0.0123}}


def same_problem(foreign: httpx.Response, missing: httpx.Response, foreign_id: str, missing_id: str) -> None:
    """`foreign` (another tenant's id) is the problem document `missing` is, the id aside."""
    assert foreign.status_code == missing.status_code, (foreign.text, missing.text)
    assert foreign.headers["content-type"] == missing.headers["content-type"]
    assert foreign.json() == json.loads(missing.text.replace(missing_id, foreign_id))


def listed(gw: Gateway, headers: dict[str, str]) -> dict[str, dict]:
    page = gw.client.get("/v1/tasks", params={"limit": 1000}, headers=headers).json()
    return {t["id"]: t for t in page["items"]}


def suites(gw: Gateway, headers: dict[str, str]) -> dict[str, dict]:
    r = gw.client.get("/v1/suites", headers=headers)
    assert r.status_code == 200, r.text
    return {s["name"]: s for s in r.json()}


def test_another_tenants_task_is_unknown(gw: Gateway) -> None:
    alice = register(gw, AUTH_A, **SECRET)

    got = gw.client.get(f"/v1/tasks/{alice}", headers=AUTH_B)
    assert_problem(got, 404, "not_found")
    same_problem(got, gw.client.get(f"/v1/tasks/{MISSING_TASK}", headers=AUTH_B), alice, MISSING_TASK)
    assert alice not in listed(gw, AUTH_B)

    for path, body in (
        ("/v1/evaluations", {"task_id": alice, "solution": solution()}),
        ("/v1/batches", {"evaluations": [{"task_id": alice, "solution": solution()}]}),
    ):
        foreign = gw.client.post(path, json=body, headers=AUTH_B)
        assert_problem(foreign, 422, "unknown_task")
        unknown = json.loads(json.dumps(body).replace(alice, MISSING_TASK))
        missing = gw.client.post(path, json=unknown, headers=AUTH_B)
        same_problem(foreign, missing, alice, MISSING_TASK)
    assert gw.enqueuer.job_ids == []  # nothing was made for bob

    # alice still has hers, whole
    mine = gw.client.get(f"/v1/tasks/{alice}", headers=AUTH_A).json()
    assert (mine["name"], mine["meta"]["atol"], mine["shared"]) == ("alice-secret", 0.0123, False)
    assert alice in listed(gw, AUTH_A)
    r = gw.client.post("/v1/evaluations", json={"task_id": alice, "solution": solution()}, headers=AUTH_A)
    assert r.status_code == 202, r.text


def test_registering_the_same_content_tells_nothing_of_the_first(gw: Gateway) -> None:
    """Tasks are content-addressed: bob registering alice's source gets the same id, but as his own (201,
    his name); alice's name and her registration stay hers."""
    alice = register(gw, AUTH_A, **SECRET)
    body = {"source": TASK_SOURCE, "meta": SECRET["meta"], "name": "bobs"}
    first = gw.client.post("/v1/tasks", json=body, headers=AUTH_B)
    assert first.status_code == 201 and first.json()["id"] == alice
    assert first.json()["name"] == "bobs" and first.json()["shared"] is False
    assert gw.client.post("/v1/tasks", json=body, headers=AUTH_B).status_code == 200
    assert gw.client.get(f"/v1/tasks/{alice}", headers=AUTH_B).json()["name"] == "bobs"
    assert gw.client.get(f"/v1/tasks/{alice}", headers=AUTH_A).json()["name"] == "alice-secret"
    r = gw.client.post("/v1/evaluations", json={"task_id": alice, "solution": solution()}, headers=AUTH_B)
    assert r.status_code == 202, r.text


def test_another_tenants_profile_is_unknown(gw: Gateway) -> None:
    alice = register(gw, AUTH_A, **SECRET)
    info = WorkerInfo(
        queue="gpu.a",
        kind="gpu",
        device_class="H200",
        device="cuda:0",
        hostname="h",
        pid=os.getpid(),
        heartbeat_at=time.time(),
        facts=None,
        problem=None,
    )
    gw.records.workers.heartbeat(info)
    assert gw.client.post(f"/v1/tasks/{alice}/profile", headers=AUTH_A).status_code == 202

    for method in ("POST", "GET"):
        foreign = gw.client.request(method, f"/v1/tasks/{alice}/profile", headers=AUTH_B)
        assert_problem(foreign, 404, "not_found")
        missing = gw.client.request(method, f"/v1/tasks/{MISSING_TASK}/profile", headers=AUTH_B)
        same_problem(foreign, missing, alice, MISSING_TASK)
    assert gw.enqueuer.profiles == [(alice, "default", "gpu.a")]  # bob's POST queued nothing
    assert gw.client.get(f"/v1/tasks/{alice}/profile", headers=AUTH_A).json()["state"] == "queued"


def test_suite_names_are_per_tenant(gw: Gateway) -> None:
    alice = register(gw, AUTH_A, **SECRET)
    made = gw.client.post("/v1/suites", json={"name": "train", "task_ids": [alice]}, headers=AUTH_A)
    assert made.status_code == 201 and made.json()["version"] == 1 and made.json()["shared"] is False

    assert "train" not in suites(gw, AUTH_B)
    for params in ({}, {"version": 1}, {"sample": 1, "seed": 3}):
        foreign = gw.client.get("/v1/suites/train/tasks", params=params, headers=AUTH_B)
        assert_problem(foreign, 404, "not_found")
        missing = gw.client.get("/v1/suites/nosuch/tasks", params=params, headers=AUTH_B)
        same_problem(foreign, missing, "train", "nosuch")

    # bob cannot put alice's task in a suite of his: it is unknown to him, as a missing one is
    foreign = gw.client.post("/v1/suites", json={"name": "mine", "task_ids": [alice]}, headers=AUTH_B)
    assert_problem(foreign, 422, "unknown_task")
    missing = gw.client.post("/v1/suites", json={"name": "mine", "task_ids": [MISSING_TASK]}, headers=AUTH_B)
    same_problem(foreign, missing, alice, MISSING_TASK)

    # bob's POST of the name makes his own suite; alice's is untouched
    bob = register(gw, AUTH_B, source=TASK_SOURCE + "# bob's\n")
    his = gw.client.post("/v1/suites", json={"name": "train", "task_ids": [bob]}, headers=AUTH_B)
    assert his.status_code == 201 and his.json()["version"] == 1, his.text
    items = gw.client.get("/v1/suites/train/tasks", headers=AUTH_B).json()["items"]
    assert [i["task_id"] for i in items] == [bob]
    hers = gw.client.get("/v1/suites/train/tasks", headers=AUTH_A).json()
    assert (hers["version"], [i["task_id"] for i in hers["items"]]) == (1, [alice])
    assert suites(gw, AUTH_A)["train"]["size"] == 1 and suites(gw, AUTH_B)["train"]["size"] == 1
    again = gw.client.post("/v1/suites", json={"name": "train", "task_ids": [alice]}, headers=AUTH_A)
    assert again.status_code == 200 and again.json()["version"] == 1  # bob's write changed nothing of hers


def test_operator_content_is_shared_read_only(make_gateway: GatewayFactory) -> None:
    """Auth off, the caller is the operator: what it registers every tenant reads; a tenant's POST of a
    shared suite's name makes the tenant's own, and the shared one stays as it was."""
    tenants = make_gateway()
    operator = make_gateway(api_keys={})
    shared = register(operator, {}, name="pool-relu")
    made = operator.client.post("/v1/suites", json={"name": "pool", "task_ids": [shared]})
    assert made.status_code == 201 and made.json()["shared"] is True
    alice = register(tenants, AUTH_A, **SECRET)

    for auth in (AUTH_A, AUTH_B):
        view = tenants.client.get(f"/v1/tasks/{shared}", headers=auth).json()
        assert (view["name"], view["shared"]) == ("pool-relu", True)
        assert listed(tenants, auth)[shared]["shared"] is True
        body = {"task_id": shared, "solution": solution()}
        assert tenants.client.post("/v1/evaluations", json=body, headers=auth).status_code == 202
        assert suites(tenants, auth)["pool"] == made.json()
        items = tenants.client.get("/v1/suites/pool/tasks", headers=auth).json()["items"]
        assert [i["task_id"] for i in items] == [shared]
    # registering a shared task is no news to a tenant
    again = tenants.client.post("/v1/tasks", json={"source": TASK_SOURCE, "name": "x"}, headers=AUTH_B)
    assert again.status_code == 200 and again.json()["shared"] is True

    # the operator does not see a tenant's content either
    assert_problem(operator.client.get(f"/v1/tasks/{alice}"), 404, "not_found")
    assert alice not in listed(operator, {})

    bob = register(tenants, AUTH_B, source=TASK_SOURCE + "# bob's\n")
    his = tenants.client.post("/v1/suites", json={"name": "pool", "task_ids": [bob, shared]}, headers=AUTH_B)
    assert his.status_code == 201 and his.json()["version"] == 1 and his.json()["shared"] is False
    assert suites(tenants, AUTH_B)["pool"]["size"] == 2
    assert suites(tenants, AUTH_A)["pool"] == made.json()
    assert operator.client.get("/v1/suites").json() == [made.json()]
    items = tenants.client.get("/v1/suites/pool/tasks", headers=AUTH_A).json()["items"]
    assert [i["task_id"] for i in items] == [shared]


def test_records_stored_before_tenancy_are_shared(gw: Gateway) -> None:
    """A task and a suite written as the service wrote them before tenancy (no owner anywhere) stay
    readable by every tenant, and no tenant can change them."""
    spec = TaskSpec(source=TASK_SOURCE + "# legacy\n", name="legacy-relu")
    doc = {"spec": spec.model_dump(mode="json"), "created_at": 1.0}
    gw.records.r.set("evalsvc:task:" + spec.id, json.dumps(doc))
    gw.records.r.zadd("evalsvc:tasks", {spec.id: 1.0})
    suite = Suite(name="legacy", version=1, task_ids=[spec.id], created_at=1.0)
    gw.records.r.hset("evalsvc:suite:legacy", "1", suite.model_dump_json())
    gw.records.r.hset("evalsvc:suites", "legacy", 1)

    for auth in (AUTH_A, AUTH_B):
        view = gw.client.get(f"/v1/tasks/{spec.id}", headers=auth).json()
        assert (view["name"], view["created_at"], view["shared"]) == ("legacy-relu", 1.0, True)
        assert spec.id in listed(gw, auth)
        assert suites(gw, auth)["legacy"]["shared"] is True
        body = {"task_id": spec.id, "solution": solution()}
        assert gw.client.post("/v1/evaluations", json=body, headers=auth).status_code == 202
    other = register(gw, AUTH_A, source=TASK_SOURCE + "# other\n")
    r = gw.client.post("/v1/suites", json={"name": "legacy", "task_ids": [other]}, headers=AUTH_A)
    assert r.status_code == 201 and r.json()["shared"] is False
    legacy = PoolStore(gw.records.r).suite("legacy")
    assert legacy is not None and legacy.task_ids == [spec.id] and legacy.version == 1
    items = gw.client.get("/v1/suites/legacy/tasks", headers=AUTH_B).json()["items"]
    assert [i["task_id"] for i in items] == [spec.id]
