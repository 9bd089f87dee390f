"""The gateway's side of profiling: reference-profile jobs routed to a live GPU queue, once per (task,
device class); text forms; device facts from heartbeats. Real Redis; only the enqueuer records."""

from __future__ import annotations

import os
import time

from evalsvc.core.profiles import DeviceFacts, KernelTrace, OpStat, ReferenceProfile, TaskWork
from evalsvc.records.documents import State, WorkerInfo
from tests.api.conftest import AUTH_A, SOLUTION, Gateway, assert_problem

H200 = DeviceFacts(
    name="NVIDIA H200",
    kind="cuda",
    compute_capability="9.0",
    sm_count=132,
    memory_bytes=143 * 10**9,
    peak_bandwidth_bps=4.1e12,
    matmul_flops={"fp32": 5.1e13, "tf32": 3.9e14, "bf16": 7.2e14},
    compile_target="sm_90a",
)


def _gpu(gw: Gateway, queue: str = "gpu.a", device_class: str = "H200") -> None:
    info = WorkerInfo(
        queue=queue,
        kind="gpu",
        device_class=device_class,
        device="cuda:0",
        hostname="h",
        pid=os.getpid(),
        heartbeat_at=time.time(),
        facts=H200,
    )
    gw.records.workers.heartbeat(info)


def test_profile_is_queued_once_to_a_live_gpu_worker(gw: Gateway, task_id: str) -> None:
    url = f"/v1/tasks/{task_id}/profile"
    assert_problem(gw.client.post(url, headers=AUTH_A), 503, "no_worker")
    assert gw.enqueuer.profiles == []
    _gpu(gw)
    first = gw.client.post(url, headers=AUTH_A)
    assert first.status_code == 202 and first.json()["state"] == "queued", first.text
    again = gw.client.post(url, headers=AUTH_A)
    assert again.status_code == 200 and again.json()["created_at"] == first.json()["created_at"]
    assert gw.enqueuer.profiles == [(task_id, "default", "gpu.a")]
    assert_problem(gw.client.post(url, params={"device_class": "A100"}, headers=AUTH_A), 503, "no_worker")
    bad_class = gw.client.post(url, params={"device_class": "a b"}, headers=AUTH_A)
    assert_problem(bad_class, 422, "validation_error")
    assert_problem(gw.client.post("/v1/tasks/t_nope/profile", headers=AUTH_A), 404, "not_found")
    assert gw.client.get(url, params={"format": "text"}, headers=AUTH_A).text.endswith("queued\n")


def test_done_profile_reads_back_as_json_and_text(gw: Gateway, task_id: str) -> None:
    _gpu(gw)
    gw.client.post(f"/v1/tasks/{task_id}/profile", headers=AUTH_A)
    record = gw.records.profiles.get_profile(task_id, "default")
    assert record is not None
    op = OpStat(name="aten::clamp_min", shapes="[64]", calls=1, time_us=3.5, share=1.0)
    record.profile = ReferenceProfile(
        task_id=task_id,
        device="cuda:0",
        device_name="NVIDIA H200",
        eager=KernelTrace(runs=3, total_us=3.5, operators=[op]),
        work=TaskWork(min_bytes=512, flops=0, input_bytes=256, output_bytes=256),
    )
    record.state = State.DONE
    gw.records.profiles.put_profile(record)
    got = gw.client.get(f"/v1/tasks/{task_id}/profile", params={"wait": 5}, headers=AUTH_A)
    assert got.status_code == 200
    assert got.json()["profile"]["eager"]["operators"][0]["name"] == "aten::clamp_min"
    text = gw.client.get(f"/v1/tasks/{task_id}/profile", params={"format": "text"}, headers=AUTH_A)
    assert text.headers["content-type"].startswith("text/plain")
    assert "aten::clamp_min ([64])" in text.text and "outputs 256 B" in text.text
    bad = gw.client.get(f"/v1/tasks/{task_id}/profile", params={"format": "xml"}, headers=AUTH_A)
    assert_problem(bad, 422, "validation_error")


def test_devices_show_facts_and_compile_target(gw: Gateway) -> None:
    _gpu(gw)
    (dev,) = gw.client.get("/v1/devices", headers=AUTH_A).json()
    assert dev["facts"]["compile_target"] == "sm_90a" and dev["facts"]["sm_count"] == 132
    text = gw.client.get("/v1/devices", params={"format": "text"}, headers=AUTH_A).text
    assert "cc 9.0, 132 SMs" in text and "copy 4.1 TB/s" in text and "target sm_90a" in text


def test_unfinished_evaluation_as_text(gw: Gateway, task_id: str) -> None:
    sub = gw.client.post("/v1/evaluations", json={"task_id": task_id, "solution": SOLUTION}, headers=AUTH_A)
    text = gw.client.get(f"/v1/evaluations/{sub.json()['id']}", params={"format": "text"}, headers=AUTH_A)
    assert text.status_code == 200 and text.text == f"evaluation {sub.json()['id']}: queued\n"
