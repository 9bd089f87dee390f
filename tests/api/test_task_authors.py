"""Task code only from the tenants the operator names (`task_authors`): a task is code the judge runs, so
a fleet that does not trust its tenants like the operator serves shared tasks only (docs/security.md).
Real Redis; nothing here depends on timing."""

from __future__ import annotations

from evalsvc.api.submit import register_task
from evalsvc.core.tasks import TaskSpec
from tests.api.conftest import AUTH_A, AUTH_B, TASK_SOURCE, GatewayFactory, assert_problem, solution


def test_only_named_tenants_hand_the_service_task_code(make_gateway: GatewayFactory) -> None:
    gw = make_gateway(task_authors=["tenant-a"])
    inline = {"task": {"source": TASK_SOURCE}, "solution": solution()}
    refused = [
        gw.client.post("/v1/tasks", json={"source": TASK_SOURCE}, headers=AUTH_B),
        gw.client.post("/v1/evaluations", json=inline, headers=AUTH_B),
        gw.client.post("/v1/batches", json={"evaluations": [inline]}, headers=AUTH_B),
    ]
    for r in refused:
        body = assert_problem(r, 403, "task_authoring_forbidden")
        assert "tenant-b" in body["detail"]
    assert gw.enqueuer.job_ids == []
    assert gw.client.get("/v1/tasks", headers=AUTH_B).json()["items"] == []  # nothing was stored

    # A named tenant registers and sends tasks; everyone evaluates against a shared task by id.
    assert gw.client.post("/v1/tasks", json={"source": TASK_SOURCE}, headers=AUTH_A).status_code == 201
    assert gw.client.post("/v1/evaluations", json=inline, headers=AUTH_A).status_code == 202
    shared, _ = register_task(gw.records.tasks, TaskSpec(source=TASK_SOURCE, name="shared relu"), None)
    r = gw.client.post("/v1/evaluations", json={"task_id": shared, "solution": solution(1)}, headers=AUTH_B)
    assert r.status_code == 202, r.text


def test_every_tenant_may_author_tasks_unless_the_operator_says_otherwise(
    make_gateway: GatewayFactory,
) -> None:
    gw = make_gateway()
    assert gw.settings.task_authors is None
    assert gw.client.post("/v1/tasks", json={"source": TASK_SOURCE}, headers=AUTH_B).status_code == 201
