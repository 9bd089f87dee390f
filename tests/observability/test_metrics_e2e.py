"""Metrics end to end: the real stack of `evalsvc up` (redis-server, the gateway, a prefork compile worker
using the Docker sandbox, a CPU-device worker, each process group with its own PROMETHEUS_MULTIPROC_DIR
and the workers with their exporters) and a real Prometheus scraping it every second.

A few CPU evaluations of a small relu task move the counters (ok, incorrect, refused, a compile cache hit,
a deduplicated submission, a problem response); then every panel query of every dashboard must return
data from Prometheus' HTTP API. Panels of NVML readings need a GPU and are checked only where there is one.
Prometheus loads the alert rules too (deploy/prometheus/rules/): each must evaluate without an error.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from evalsvc.core.options import EvalOptions
from evalsvc.core.solutions import Solution
from evalsvc.observability.gpu_health import GpuHealthCollector
from evalsvc.observability.prometheus_config import rule_files
from evalsvc.records.documents import State
from evalsvc.sdk import ApiError, Client
from evalsvc.stack import Stack
from evalsvc.suite import cases
from tests.conftest import TEST_DATA
from tests.observability.dashboards import metric_names, panel_queries

pytestmark = pytest.mark.docker

FAST = dict(trials=2, timing_budget_s=0.2, compile_baseline=False, timing_pool=2)
NVML_METRICS = {f.name for f in GpuHealthCollector().describe()}


def _require_prometheus() -> str:
    exe = shutil.which("prometheus")
    if exe is None:
        msg = "prometheus is not installed (apt-get install prometheus; scripts/setup.sh does)"
        if os.environ.get("EVALSVC_REQUIRE_DOCKER") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return exe


def _free_port(pair: bool = False) -> int:
    """A free port (with `pair`, one whose successor is free too: the CPU worker's exporter)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if not pair or port >= 65535:
            return port
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port pair")


@pytest.fixture(scope="module")
def stack(cpu_settings) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
    _require_prometheus()
    root = Path(tempfile.mkdtemp(prefix="evalsvc-obs-"))
    (root / "logs").mkdir()
    (TEST_DATA / "pch").mkdir(parents=True, exist_ok=True)
    (root / "pch").symlink_to(TEST_DATA / "pch")  # the precompiled headers other tests built (or build)
    s = Stack(
        data_dir=root,
        redis_url=f"redis://127.0.0.1:{_free_port()}/0",
        port=_free_port(),
        metrics_port=_free_port(pair=True),
        prometheus_port=_free_port(),
        scrape_interval_s=1.0,
    )
    try:
        s.start_redis()
        s.start_services([])
        s.wait_ready(timeout=300)
        _wait(lambda: _get(f"http://127.0.0.1:{s.prometheus_port}/-/ready") is not None, 60, "prometheus")
        yield s
    finally:
        s.stop()
        shutil.rmtree(root, ignore_errors=True)


def _get(url: str) -> httpx.Response | None:
    try:
        r = httpx.get(url, timeout=5)
    except httpx.HTTPError:
        return None
    return r if r.status_code == 200 else None


def _wait(cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}")


def _scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    r = _get(url)
    assert r is not None, url
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for fam in text_string_to_metric_families(r.text)
        for s in fam.samples
    }


def _sum(samples: dict, name: str, **labels: str) -> float:
    want = set(labels.items())
    return sum(v for (n, lbl), v in samples.items() if n == name and want <= lbl)


def _pch_flags(solution: Solution) -> Solution:
    """The example without OpenMP, so its flags (-O3) match the precompiled torch headers: a build in
    tens of seconds instead of minutes on two cores (the pragma is then ignored; the kernel is serial)."""
    (name, text), *_ = solution.files.items()
    text = text.replace('extra_cflags=["-O3", "-fopenmp"]', 'extra_cflags=["-O3"]')
    text = text.replace('extra_ldflags=["-fopenmp"],', "")
    assert "fopenmp" not in text
    return Solution(files={name: text}, format=solution.format)


def _non_static(solution: Solution) -> Solution:
    """The honest solution, but its extension name changes with every import: refused as not static."""
    (name, text), *_ = solution.files.items()
    text = text.replace('name="evalsvc_ex_l1_relu_cpu_ok"', 'name="relu_" + str(os.getpid())')
    return Solution(files={name: "import os\n" + text}, format=solution.format)


@pytest.fixture(scope="module")
def traffic(stack: Stack) -> dict[str, str]:
    """Run the evaluations; returns their statuses by name."""
    ok = next(c for c in cases("cpu") if c.task_id == "l1/relu" and c.expect == "ok")
    wrong = next(c for c in cases("cpu") if c.task_id == "l1/relu" and c.expect == "incorrect")
    task = ok.task()
    small = task.model_copy(update={"source": task.source.replace("ROWS = 5120", "ROWS = 64")})
    assert small.source != task.source
    honest, incorrect = _pch_flags(ok.solution()), _pch_flags(wrong.solution())
    forbidden = _non_static(ok.solution())
    assert forbidden.files != ok.solution().files
    url = f"http://{stack.host}:{stack.port}"
    with Client(url) as client:
        task_id = client.register_task(small)
        # One at a time: each result is checked on its own.
        out = {
            name: client.evaluate(task_id, solution, EvalOptions(**FAST), timeout=600)
            for name, solution in (
                ("ok", honest),
                ("incorrect", incorrect),
                ("forbidden", forbidden),
            )
        }
        # The same solution with other options: evaluated again, its build served from the compile cache.
        again = client.evaluate(task_id, honest, EvalOptions(**{**FAST, "trials": 3}), timeout=600)
        dup = client.submit(task_id, honest, EvalOptions(**FAST))
        with pytest.raises(ApiError):
            client.get("e_00000000000000000000")
    assert all(v.state is State.DONE for v in out.values()), out
    assert again.result is not None and again.result.compile is not None and again.result.compile.cached
    assert dup.deduplicated and dup.id == out["ok"].id
    statuses = {name: str(v.result.status) for name, v in out.items() if v.result is not None}
    statuses["again"] = str(again.result.status)
    return statuses


def test_counters_and_histograms_move_by_outcome_and_stage(stack: Stack, traffic: dict[str, str]) -> None:
    assert traffic == {"ok": "ok", "incorrect": "incorrect", "forbidden": "forbidden", "again": "ok"}
    gateway = _scrape(f"http://{stack.host}:{stack.port}/metrics")
    compile_w = _scrape(f"http://127.0.0.1:{stack.metrics_port}/metrics")
    cpu_w = _scrape(f"http://127.0.0.1:{stack.metrics_port + 1}/metrics")

    assert _sum(gateway, "evalsvc_submissions_total", kind="evaluation", outcome="new") == 4
    assert _sum(gateway, "evalsvc_submissions_total", kind="evaluation", outcome="existing") == 1
    assert _sum(gateway, "evalsvc_http_problems_total") >= 1
    assert _sum(gateway, "evalsvc_http_request_duration_seconds_count", method="POST") >= 6
    assert _sum(gateway, "evalsvc_tenant_submissions_total", tenant="anonymous", kind="evaluation") == 5
    assert _sum(gateway, "evalsvc_build_info") == 1

    # Compile worker (prefork children, aggregated): 4 builds asked, 3 built, 1 from the cache, 1 refused.
    assert _sum(compile_w, "evalsvc_jobs_started_total", worker_kind="compile") == 4
    assert _sum(compile_w, "evalsvc_compile_cache_total", outcome="hit") == 1
    assert _sum(compile_w, "evalsvc_compile_cache_total", outcome="miss") == 3
    assert (
        _sum(compile_w, "evalsvc_stage_duration_seconds_count", stage="queue_wait", worker_kind="compile")
        == 4
    )
    assert _sum(compile_w, "evalsvc_stage_duration_seconds_count", stage="compile") == 3
    assert _sum(compile_w, "evalsvc_results_total", job_kind="evaluate", status="forbidden") == 1
    assert _sum(compile_w, "evalsvc_refusals_total", action="refused") >= 1
    assert _sum(compile_w, "evalsvc_inflight_jobs") == 0
    assert ("evalsvc_queue_depth", frozenset({("queue", "compile")})) in compile_w
    assert _sum(compile_w, "evalsvc_sandbox_failures_total") == 0
    assert _sum(compile_w, "evalsvc_worker_info", worker_kind="compile") == 1
    assert _sum(compile_w, "evalsvc_build_info") == 1
    heartbeats = {
        dict(lbl)["device_class"]: v
        for (n, lbl), v in compile_w.items()
        if n.endswith("heartbeat_age_seconds")
    }
    assert heartbeats and all(0 <= age < 60 for age in heartbeats.values()), (
        heartbeats
    )  # the CPU worker beats

    # The CPU-device worker: three evaluations judged.
    assert _sum(cpu_w, "evalsvc_results_total", job_kind="evaluate", status="ok") == 2
    assert _sum(cpu_w, "evalsvc_results_total", job_kind="evaluate", status="incorrect") == 1
    assert _sum(cpu_w, "evalsvc_stage_duration_seconds_count", stage="evaluate", worker_kind="gpu") == 3
    assert _sum(cpu_w, "evalsvc_stage_duration_seconds_count", stage="end_to_end", worker_kind="gpu") == 3
    assert _sum(cpu_w, "evalsvc_stage_duration_seconds_sum", stage="evaluate") > 0
    assert _sum(cpu_w, "evalsvc_reward_count") == 3
    assert _sum(cpu_w, "evalsvc_reward_bucket", le="-1.0") == 1  # the incorrect one
    assert _sum(cpu_w, "evalsvc_reward_points_total", sign="positive") >= 2
    assert _sum(cpu_w, "evalsvc_tenant_rewards_total", tenant="anonymous") == 3
    assert _sum(cpu_w, "evalsvc_build_info") == 1


def test_every_dashboard_query_returns_data_from_prometheus(stack: Stack, traffic: dict[str, str]) -> None:
    api = f"http://127.0.0.1:{stack.prometheus_port}/api/v1/query"

    def query(expr: str) -> list:
        r = httpx.get(api, params={"query": expr}, timeout=10)
        body = r.json()
        assert r.status_code == 200 and body["status"] == "success", (expr, body)
        return body["data"]["result"]

    # Prometheus has scraped everything the evaluations did: its totals match the endpoints'.
    def caught_up() -> bool:
        got = query("sum(evalsvc_results_total)")
        return bool(got) and float(got[0]["value"][1]) >= 4

    _wait(caught_up, 30, "Prometheus to scrape the results")
    time.sleep(3)  # a few more scrapes, so rates have two samples after the last change
    targets = httpx.get(f"http://127.0.0.1:{stack.prometheus_port}/api/v1/targets", timeout=10).json()
    health = {t["scrapeUrl"]: t["health"] for t in targets["data"]["activeTargets"]}
    assert len(health) == 3 and set(health.values()) == {"up"}, health

    has_gpu = bool(query("evalsvc_gpu_memory_total_bytes"))
    empty, checked = [], 0
    for q in panel_queries():
        if not has_gpu and metric_names(q.expr) & {n + s for n in NVML_METRICS for s in ("", "_total")}:
            continue
        checked += 1
        if not query(q.promql()):
            empty.append((q.dashboard, q.panel, q.promql()))
    assert checked >= 25
    assert not empty, empty


def test_alert_rules_load_and_evaluate(stack: Stack, traffic: dict[str, str]) -> None:
    want = {
        rule["alert"]
        for path in rule_files()
        for group in yaml.safe_load(Path(path).read_text())["groups"]
        for rule in group["rules"]
    }
    assert want
    url = f"http://127.0.0.1:{stack.prometheus_port}/api/v1/rules"

    def rules() -> dict[str, dict]:
        body = httpx.get(url, timeout=10).json()
        return {r["name"]: r for g in body["data"]["groups"] for r in g["rules"]}

    # Evaluated at least once since the traffic, so every metric an alert reads has been scraped.
    _wait(lambda: all(r["health"] != "unknown" for r in rules().values()), 30, "the rules to be evaluated")
    got = rules()
    assert set(got) == want
    broken = {name: r.get("lastError") for name, r in got.items() if r["health"] != "ok"}
    assert not broken, broken
