"""Operators' endpoints: liveness, readiness with what is missing, devices, Prometheus metrics."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from evalsvc.records.documents import WorkerInfo
from tests.api.conftest import AUTH_A, Gateway, assert_problem


def worker(kind: str, queue: str, device: str = "cpu", device_class: str = "cpu") -> WorkerInfo:
    return WorkerInfo(
        queue=queue,
        kind=kind,
        device_class=device_class,
        device=device,
        hostname=f"host-{queue}",
        pid=1,
        heartbeat_at=time.time(),
    )


def test_livez(gw: Gateway) -> None:
    assert gw.client.get("/livez").json() == {"status": "ok"}


def test_readyz_says_what_is_missing(gw: Gateway) -> None:
    r = gw.client.get("/readyz")
    body = assert_problem(r, 503, "not_ready")
    assert body["redis"] == "ok" and len(body["missing"]) == 2
    gw.records.workers.heartbeat(worker("compile", "compile"))
    assert gw.client.get("/readyz").json()["missing"] == ["a live gpu worker"]
    gw.records.workers.heartbeat(worker("gpu", "gpu.abc", "cuda:0", "H200"))
    ready = gw.client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"ready": True, "redis": "ok", "workers": {"compile": 1, "gpu": 1}, "missing": []}


def test_devices_lists_live_gpu_workers(gw: Gateway) -> None:
    gw.records.workers.heartbeat(worker("compile", "compile"))
    gw.records.workers.heartbeat(worker("gpu", "gpu.b", "cuda:1", "H200"))
    gw.records.workers.heartbeat(worker("gpu", "gpu.a", "cuda:0", "H200"))
    stale = worker("gpu", "gpu.old")
    stale.heartbeat_at -= 600
    gw.records.workers.heartbeat(stale)
    devices = gw.client.get("/v1/devices", headers=AUTH_A).json()
    assert [(d["queue"], d["device"], d["device_class"]) for d in devices] == [
        ("gpu.a", "cuda:0", "H200"),
        ("gpu.b", "cuda:1", "H200"),
    ]
    assert_problem(gw.client.get("/v1/devices"), 401, "unauthorized")


def test_metrics_by_route_template(gw: Gateway, task_id: str) -> None:
    gw.client.get(f"/v1/tasks/{task_id}", headers=AUTH_A)
    gw.client.get("/v1/tasks/t_unknown", headers=AUTH_A)
    gw.client.get("/no/such/path")
    text = gw.client.get("/metrics").text
    assert (
        'evalsvc_http_request_duration_seconds_count{method="GET",route="/v1/tasks/{task_id}",'
        'status_class="2xx"} 1.0' in text
    )
    assert 'route="/v1/tasks/{task_id}",status_class="4xx"} 1.0' in text
    assert 'route="unmatched"' in text and "t_unknown" not in text
    assert 'evalsvc_http_problems_total{code="not_found"} 2.0' in text


def test_metrics_count_submissions(gw: Gateway, task_id: str) -> None:
    body = {"task_id": task_id, "solution": {"files": {"solution.py": "x = 1\n"}}}
    for _ in range(2):
        gw.client.post("/v1/evaluations", json=body, headers=AUTH_A)
    text = gw.client.get("/metrics").text
    assert 'evalsvc_submissions_total{kind="evaluation",outcome="new"} 1.0' in text
    assert 'evalsvc_submissions_total{kind="evaluation",outcome="existing"} 1.0' in text
    assert 'evalsvc_tenant_submissions_total{kind="evaluation",tenant="tenant-a"} 2.0' in text
    assert 'tenant="tenant-b"' not in text  # a tenant appears once it submits
    assert 'evalsvc_build_info{commit="unknown",version="' in text


def test_metrics_in_multiprocess_mode(tmp_path: Path) -> None:
    code = (
        "from fastapi.testclient import TestClient\n"
        "from evalsvc.api.app import create_app\n"
        "from evalsvc.api.enqueue import RecordingEnqueuer\n"
        "from evalsvc.settings import Settings\n"
        "with TestClient(create_app(Settings(), enqueuer=RecordingEnqueuer())) as c:\n"
        "    c.get('/livez')\n"
        "    print(c.get('/metrics').text)\n"
    )
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "EVALSVC_GIT_COMMIT": "abc123"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert (
        'evalsvc_http_request_duration_seconds_count{method="GET",route="/livez",status_class="2xx"}'
        in out.stdout
    )
    assert list(tmp_path.glob("*.db"))
    assert 'evalsvc_build_info{commit="abc123",version="' in out.stdout
