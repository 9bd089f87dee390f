"""Profiling feedback over the real stack on the CPU device: redis-server, the uvicorn gateway, a Celery
compile worker (Docker sandbox) and one CPU-device worker. What applies on a CPU is answered (operators
ranked by time, timing, roofline from the CPU's measured bandwidth); what needs a GPU says so.

Token budget: text reports are counted as characters / 4 (the usual English-text ratio of BPE tokenizers).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from evalsvc.core.options import EvalOptions
from evalsvc.core.solutions import Solution
from evalsvc.core.tasks import TaskSpec
from evalsvc.suite import cases
from tests.live_stack import LiveStack, running_stack

pytestmark = pytest.mark.docker

TOKEN_BUDGET = 2000


def tokens(text: str) -> int:
    return len(text) // 4


@pytest.fixture(scope="module")
def stack(cpu_settings) -> Iterator[LiveStack]:  # type: ignore[no-untyped-def]
    with running_stack("evalsvc-prof-", {"prof": "gpu.cpu-p"}, 1) as s:  # the least that runs every stage
        yield s


@pytest.fixture(scope="module")
def http(stack: LiveStack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stack.url, timeout=200) as client:
        yield client


ROWS = 32  # the bundled task at 1/8 of its batch: these tests check the service, not CPU arithmetic


def _gemm() -> tuple[TaskSpec, Solution]:
    case = next(c for c in cases("cpu") if c.task_id == "l2/gemm_bias_relu" and c.expect == "ok")
    task = case.task()
    small = task.model_copy(update={"source": task.source.replace("BATCH = 256", f"BATCH = {ROWS}")})
    assert small.source != task.source
    return small, case.solution()


def test_devices_publish_measured_facts(http: httpx.Client) -> None:
    deadline = time.monotonic() + 60
    devices = http.get("/v1/devices").json()
    while not any(d["facts"] for d in devices) and time.monotonic() < deadline:
        time.sleep(0.5)
        devices = http.get("/v1/devices").json()
    (cpu,) = [d for d in devices if d["queue"] == "gpu.cpu-p"]
    facts = cpu["facts"]
    assert (
        facts["kind"] == "cpu" and facts["peak_bandwidth_bps"] > 1e8 and facts["matmul_flops"]["fp32"] > 1e7
    )
    assert facts["compute_capability"] is None and facts["compile_target"] is None  # no GPU: no target
    text = http.get("/v1/devices", params={"format": "text"}).text
    assert "gpu.cpu-p" in text and "copy" in text and "B/s" in text


def test_reference_profile_ranks_operators_and_says_what_needs_a_gpu(http: httpx.Client) -> None:
    task, _ = _gemm()
    task_id = http.post("/v1/tasks", json=task.model_dump(mode="json")).json()["id"]
    assert http.get(f"/v1/tasks/{task_id}/profile").status_code == 404
    queued = http.post(f"/v1/tasks/{task_id}/profile")
    assert queued.status_code == 202, queued.text
    assert http.post(f"/v1/tasks/{task_id}/profile").status_code == 200  # one profile per (task, class)
    record = http.get(f"/v1/tasks/{task_id}/profile", params={"wait": 120}).json()
    assert record["state"] == "done" and record["error"] is None, record
    prof = record["profile"]
    ops = prof["eager"]["operators"]
    assert ops[0]["name"] == "aten::addmm" and f"[{ROWS}, 1024]" in ops[0]["shapes"], ops  # the GEMM leads
    assert [o["time_us"] for o in ops] == sorted((o["time_us"] for o in ops), reverse=True)
    assert prof["eager"]["kernels"] == [] and any("need a GPU" in n for n in prof["notes"])
    work = prof["work"]
    assert work["flops"] == 2 * ROWS * 1024 * 768  # addmm: 2*M*K*N; relu and the bias add count nothing
    assert work["min_bytes"] == 4 * (ROWS * 1024 + 768 * 1024 + 768 + ROWS * 768)  # x, W, b, out (fp32)
    assert prof["compiled"] is not None and prof["compiled"]["operators"]
    text = http.get(f"/v1/tasks/{task_id}/profile", params={"format": "text"}).text
    assert "aten::addmm" in text and "torch.compile" in text and "need a GPU" in text
    assert tokens(text) < TOKEN_BUDGET
    unknown = http.post("/v1/tasks/t_nope/profile")
    assert unknown.status_code == 404 and unknown.json()["code"] == "not_found"
    none = http.post(f"/v1/tasks/{task_id}/profile", params={"device_class": "H200"})
    assert none.status_code == 503 and none.json()["code"] == "no_worker" and "Retry-After" in none.headers


def test_profiled_evaluation_has_roofline_and_profile_in_json_and_text(http: httpx.Client) -> None:
    task, solution = _gemm()
    opts = EvalOptions(trials=2, timing_budget_s=0.3, timing_pool=2, compile_baseline=False, profile=True)
    body = {"task": task.model_dump(mode="json"), "solution": solution.model_dump(mode="json")}
    submitted = http.post("/v1/evaluations", json={**body, "options": opts.model_dump(mode="json")})
    assert submitted.status_code == 202, submitted.text
    view = http.get(f"/v1/evaluations/{submitted.json()['id']}", params={"wait": 180}).json()
    result = view["result"]
    assert result["status"] == "ok", result["message"]
    roof = result["roofline"]
    median = result["timings"]["candidate"]["median_ms"]
    assert roof["flops"] == 2 * ROWS * 1024 * 768 and roof["median_ms"] == median
    expected_pct = 100 * roof["min_bytes"] / (median / 1e3) / roof["peak_bandwidth_bps"]
    assert roof["bandwidth_pct"] == pytest.approx(expected_pct) and roof["verdict"]
    prof = result["profile"]
    ops = prof["trace"]["operators"]
    assert ops and ops[0]["name"] == "(outside torch operators)", ops  # the solution's own C++ dominates
    assert any("need a GPU" in n for n in prof["notes"])
    assert prof["own_share"] is None  # no kernels on a CPU
    text = http.get(f"/v1/evaluations/{view['id']}", params={"format": "text"})
    assert text.headers["content-type"].startswith("text/plain")
    assert "roofline:" in text.text and "profile" in text.text and "need a GPU" in text.text
    assert "compile: ok" in text.text and tokens(text.text) < TOKEN_BUDGET
