"""Submissions for a device class that no worker serves are refused at the door (issue 20, item 4): such a
job could only wait at routing and fail `route_wait_s` later. Heartbeats are written by the workers' own
code (`WorkerRegistry.heartbeat`, what `WorkerContext.start_heartbeat` calls every 5 s) into a real Redis."""

from __future__ import annotations

import socket
import time

from evalsvc.records.documents import WorkerInfo
from evalsvc.records.workers import WorkerRegistry
from tests.api.conftest import AUTH_A, Gateway, assert_problem, solution


def beat(
    workers: WorkerRegistry, device_class: str, queue: str, age_s: float = 0.0, kind: str = "gpu"
) -> None:
    """One heartbeat of a worker, as the worker writes it; `age_s` back in time (a worker gone since)."""
    info = WorkerInfo(
        queue=queue,
        kind=kind,
        device_class=device_class,
        device="cuda:0" if kind == "gpu" else "cpu",
        hostname=socket.gethostname() + "-" + queue,
        pid=1,
        heartbeat_at=time.time() - age_s,
    )
    workers.heartbeat(info)


def evaluation(task_id: str, n: int, device_class: str | None = None) -> dict:
    body: dict = {"task_id": task_id, "solution": solution(n)}
    if device_class is not None:
        body["device_class"] = device_class
    return body


def test_a_class_nobody_serves_is_refused_with_the_live_classes(gw: Gateway, task_id: str) -> None:
    beat(gw.records.workers, "cpu", "compile", kind="compile")  # a compile worker's class is no device class
    beat(gw.records.workers, "H200", "gpu.a")
    beat(gw.records.workers, "cpu", "gpu.cpu")
    r = gw.client.post("/v1/evaluations", json=evaluation(task_id, 1, "H100"), headers=AUTH_A)
    body = assert_problem(r, 422, "unknown_device_class")
    assert body["device_classes"] == ["H200", "cpu"]
    assert "'H100'" in body["detail"] and "H200, cpu" in body["detail"]
    assert body["errors"] == [
        {"loc": ["body", "device_class"], "msg": "no live worker serves device class 'H100'",
         "type": "unknown_device_class"}
    ]  # fmt: skip
    assert gw.enqueuer.job_ids == [] and gw.records.jobs.inflight("tenant-a") == 0  # nothing stored or queued

    for n, served in enumerate(["H200", "cpu", "default", None]):
        r = gw.client.post("/v1/evaluations", json=evaluation(task_id, 10 + n, served), headers=AUTH_A)
        assert r.status_code == 202, (served, r.text)
    assert len(gw.enqueuer.job_ids) == 4


def test_a_batch_names_every_item_for_a_class_nobody_serves(gw: Gateway, task_id: str) -> None:
    beat(gw.records.workers, "H200", "gpu.a")
    items = [evaluation(task_id, 1, "H200"), evaluation(task_id, 2, "A100"), evaluation(task_id, 3, "B200")]
    r = gw.client.post("/v1/batches", json={"evaluations": items}, headers=AUTH_A)
    body = assert_problem(r, 422, "unknown_device_class")
    assert [e["loc"] for e in body["errors"]] == [
        ["body", "evaluations", 1, "device_class"],
        ["body", "evaluations", 2, "device_class"],
    ]
    assert body["detail"].startswith("evaluations[1].device_class: no live worker serves device class 'A100'")
    assert body["device_classes"] == ["H200"]
    assert gw.enqueuer.job_ids == []  # no item of the batch was stored
    ok = gw.client.post("/v1/batches", json={"evaluations": items[:1]}, headers=AUTH_A)
    assert ok.status_code == 202, ok.text


def test_a_class_whose_worker_just_went_away_is_accepted(gw: Gateway, task_id: str) -> None:
    """A worker restarting (its key expired, its class beat within `route_wait_s`): the job is accepted
    and waits at routing for it, as before; a class not seen for longer than that is refused."""
    beat(gw.records.workers, "H200", "gpu.a")
    beat(gw.records.workers, "A100", "gpu.b", age_s=gw.settings.route_wait_s / 2)
    beat(gw.records.workers, "V100", "gpu.c", age_s=gw.settings.route_wait_s + 60)
    live = [w.device_class for w in gw.records.workers.workers() if time.time() - w.heartbeat_at < 15]
    assert live == ["H200"]
    r = gw.client.post("/v1/evaluations", json=evaluation(task_id, 1, "A100"), headers=AUTH_A)
    assert r.status_code == 202, r.text
    r = gw.client.post("/v1/evaluations", json=evaluation(task_id, 2, "V100"), headers=AUTH_A)
    assert assert_problem(r, 422, "unknown_device_class")["device_classes"] == ["H200"]


def test_with_no_device_worker_live_at_all_any_class_is_accepted(gw: Gateway, task_id: str) -> None:
    """Right after `evalsvc up`, or with the whole fleet restarting, the classes cannot be told: the job is
    accepted (its compile goes on meanwhile) rather than refused."""
    beat(gw.records.workers, "cpu", "compile", kind="compile")
    beat(gw.records.workers, "H200", "gpu.a", age_s=gw.settings.route_wait_s + 60)  # long gone
    r = gw.client.post("/v1/evaluations", json=evaluation(task_id, 1, "H100"), headers=AUTH_A)
    assert r.status_code == 202, r.text
    assert gw.enqueuer.job_ids == [r.json()["id"]]


def test_a_device_class_that_is_not_a_class_name_is_a_validation_error(gw: Gateway, task_id: str) -> None:
    beat(gw.records.workers, "H200", "gpu.a")
    for bad in ["H 200", "../H200", "", "x" * 65, "H200;rm"]:
        r = gw.client.post("/v1/evaluations", json=evaluation(task_id, 1, bad), headers=AUTH_A)
        body = assert_problem(r, 422, "validation_error")
        assert body["errors"][0]["loc"] == ["body", "device_class"], bad
    items = [evaluation(task_id, 1, "H200"), evaluation(task_id, 2, "H 200")]
    r = gw.client.post("/v1/batches", json={"evaluations": items}, headers=AUTH_A)
    assert assert_problem(r, 422, "validation_error")["errors"][0]["loc"][:4] == [
        "body",
        "evaluations",
        1,
        "device_class",
    ]


def test_a_replay_is_answered_even_after_its_class_went_away(gw: Gateway, task_id: str) -> None:
    """An Idempotency-Key retry answers about the job it made, whatever the fleet looks like now."""
    beat(gw.records.workers, "H200", "gpu.a")
    headers = {**AUTH_A, "Idempotency-Key": "k-replay"}
    first = gw.client.post("/v1/evaluations", json=evaluation(task_id, 1, "H200"), headers=headers)
    assert first.status_code == 202, first.text
    gw.records.r.delete("evalsvc:device-classes", *gw.records.r.keys("evalsvc:worker:*"))
    beat(gw.records.workers, "A100", "gpu.b")  # H200 is gone for good, another class is live
    again = gw.client.post("/v1/evaluations", json=evaluation(task_id, 1, "H200"), headers=headers)
    assert again.status_code == 202 and again.json()["id"] == first.json()["id"], again.text
