"""The workers' metrics: what a job's documents turn into, and aggregation over real processes
(prometheus-client's multiprocess files, a killed process's in-flight gauge reaped)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from evalsvc.core.results import CompileReport, EvaluationResult, FailureKind, Finding, Status
from evalsvc.core.solutions import Solution
from evalsvc.observability.build_info import BuildInfoCollector, package_version
from evalsvc.observability.exporter import exposition_registry, worker_collectors
from evalsvc.observability.metrics import MAX_RULES, MAX_TENANTS, WorkerMetrics
from evalsvc.records.documents import Job, JobKind, State
from evalsvc.settings import Settings


def _job(
    result: EvaluationResult | None,
    kind: JobKind = JobKind.EVALUATE,
    created: float = 100.0,
    tenant: str = "anonymous",
) -> Job:
    return Job(
        id="e_1",
        kind=kind,
        state=State.DONE,
        tenant=tenant,
        solution=Solution(files={"solution.py": "x = 1\n"}),
        created_at=created,
        updated_at=created + 5,
        result=result,
    )


def _value(registry: CollectorRegistry, sample: str, **labels: str) -> float:
    return registry.get_sample_value(sample, labels) or 0.0


def test_results_rewards_stages_and_findings() -> None:
    m = WorkerMetrics("gpu", "w-1")
    r = m.registry
    ok = EvaluationResult(status=Status.OK, correct=True, reward=2.0, milestone=2)
    review = EvaluationResult(
        status=Status.OK,
        reward=1.0,
        milestone=1,
        findings=[Finding(rule="faster_than_memory_roofline", message="")],
    )
    refused = EvaluationResult(
        status=Status.FORBIDDEN,
        reward=-1.0,
        milestone=0,
        findings=[Finding(rule="inputs_modified", message="")],
    )
    timeout = EvaluationResult(status=Status.TIMEOUT, reward=-1.0, milestone=0)
    m.job_started(_job(ok), now=107.0)  # routed at 105: waited 2 s in the GPU queue
    for res in (ok, review, refused, timeout):
        m.finished(_job(res), now=110.0)
    assert _value(r, "evalsvc_results_total", job_kind="evaluate", status="ok", milestone="2") == 1
    assert _value(r, "evalsvc_results_total", job_kind="evaluate", status="forbidden", milestone="0") == 1
    assert _value(r, "evalsvc_reward_count") == 4
    assert _value(r, "evalsvc_reward_points_total", sign="positive") == 3.0
    assert _value(r, "evalsvc_reward_points_total", sign="negative") == 2.0
    assert _value(r, "evalsvc_refusals_total", rule="inputs_modified", action="refused") == 1
    assert _value(r, "evalsvc_refusals_total", rule="faster_than_memory_roofline", action="review") == 1
    assert _value(r, "evalsvc_sandbox_failures_total", kind="runner_timeout") == 1
    assert _value(r, "evalsvc_stage_duration_seconds_sum", stage="queue_wait", worker_kind="gpu") == 2.0
    assert _value(r, "evalsvc_stage_duration_seconds_count", stage="end_to_end", worker_kind="gpu") == 4
    assert _value(r, "evalsvc_stage_duration_seconds_sum", stage="end_to_end", worker_kind="gpu") == 40.0


def test_compile_side() -> None:
    m = WorkerMetrics("compile", "c-1")
    r = m.registry
    m.compiled(CompileReport(ok=True, duration_s=12.5))
    m.compiled(CompileReport(ok=True, cached=True, duration_s=0.0))
    m.compiled(None)
    assert _value(r, "evalsvc_compile_cache_total", outcome="hit") == 1
    assert _value(r, "evalsvc_compile_cache_total", outcome="miss") == 1
    assert _value(r, "evalsvc_stage_duration_seconds_sum", stage="compile", worker_kind="compile") == 12.5
    timeout = EvaluationResult(status=Status.TIMEOUT, reward=-1, compile=CompileReport(ok=False))
    no_gpu = EvaluationResult(status=Status.INTERNAL_ERROR, reward=-1, compile=CompileReport(ok=True))
    m.finished(_job(timeout))
    m.finished(_job(no_gpu))  # a good build with no GPU worker to take it: not a sandbox failure
    m.finished(_job(None, kind=JobKind.COMPILE))  # a compile-only job that compiled
    abandoned = EvaluationResult(status=Status.INTERNAL_ERROR, reward=-1, failure=FailureKind.JOB_ABANDONED)
    m.finished(_job(abandoned))
    died = EvaluationResult(status=Status.RUNTIME_ERROR, reward=-1, failure=FailureKind.RUNNER_DIED)
    m.finished(_job(died))
    assert _value(r, "evalsvc_sandbox_failures_total", kind="compile_timeout") == 1
    assert _value(r, "evalsvc_sandbox_failures_total", kind="compile_internal_error") == 0
    assert _value(r, "evalsvc_sandbox_failures_total", kind="job_abandoned") == 1
    assert _value(r, "evalsvc_sandbox_failures_total", kind="runner_died") == 1
    assert _value(r, "evalsvc_results_total", job_kind="compile", status="ok", milestone="none") == 1
    assert _value(r, "evalsvc_reward_count") == 4  # compile-only jobs carry no reward


def test_redelivery_and_rule_labels_are_bounded() -> None:
    m = WorkerMetrics("compile", "c-1")
    job = _job(None)
    job.attempts = 2
    m.job_started(job, now=200.0)
    assert _value(m.registry, "evalsvc_sandbox_failures_total", kind="job_redelivered") == 1
    forged = [Finding(rule=f"rule_{i}", message="") for i in range(MAX_RULES + 10)]
    m.finished(_job(EvaluationResult(status=Status.FORBIDDEN, reward=-1, findings=forged)))
    rules = {
        s.labels["rule"]
        for fam in m.registry.collect()
        if fam.name == "evalsvc_refusals"
        for s in fam.samples
    }
    assert len(rules) == MAX_RULES + 1 and "other" in rules


def test_rewards_by_tenant_with_bounded_labels() -> None:
    m = WorkerMetrics("gpu", "w-1")
    r = m.registry
    m.finished(_job(EvaluationResult(status=Status.OK, reward=2.0, milestone=2), tenant="t-a"))
    m.finished(_job(EvaluationResult(status=Status.INCORRECT, reward=-1.0, milestone=0), tenant="t-a"))
    m.finished(_job(EvaluationResult(status=Status.OK, reward=0.5, milestone=1), tenant="t-b"))
    m.finished(_job(None, kind=JobKind.COMPILE, tenant="t-c"))  # no reward: not counted for its tenant
    assert _value(r, "evalsvc_tenant_rewards_total", tenant="t-a") == 2
    assert _value(r, "evalsvc_tenant_reward_points_total", tenant="t-a", sign="positive") == 2.0
    assert _value(r, "evalsvc_tenant_reward_points_total", tenant="t-a", sign="negative") == 1.0
    assert _value(r, "evalsvc_tenant_rewards_total", tenant="t-b") == 1
    assert r.get_sample_value("evalsvc_tenant_rewards_total", {"tenant": "t-c"}) is None
    for i in range(MAX_TENANTS + 5):
        m.finished(_job(EvaluationResult(status=Status.OK, reward=1.0, milestone=1), tenant=f"x-{i}"))
    tenants = {
        s.labels["tenant"] for fam in r.collect() if fam.name == "evalsvc_tenant_rewards" for s in fam.samples
    }
    assert len(tenants) == MAX_TENANTS + 1 and "other" in tenants
    assert _value(r, "evalsvc_tenant_rewards_total", tenant="other") == 7  # the 7 tenants past the cap


def test_build_info_from_every_worker_exporter() -> None:
    for kind, commit in (("compile", "0123abc"), ("gpu", "0123abc"), ("gpu", None)):
        settings = Settings(worker_kind=kind, device="cpu", git_commit=commit)
        (build,) = [c for c in worker_collectors(settings, "compile") if isinstance(c, BuildInfoCollector)]
        registry = exposition_registry(None, None, [build])  # the others would read Redis or NVML
        labels = {"version": package_version(), "commit": commit or "unknown"}
        assert registry.get_sample_value("evalsvc_build_info", labels) == 1.0
    assert package_version() != "unknown"  # the test environment installs the package


_CHILD = textwrap.dedent(
    """
    import sys
    from evalsvc.core.results import CompileReport
    from evalsvc.observability.metrics import WorkerMetrics

    m = WorkerMetrics("compile", "c-1")
    m.compiled(CompileReport(ok=True, duration_s=1.0))
    if sys.argv[1] == "hold":
        with m.in_flight():
            print("holding", flush=True)
            sys.stdin.read()
    """
)


def test_multiprocess_aggregation_and_dead_processes(tmp_path: Path) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for _ in range(2):
        subprocess.run([sys.executable, "-c", _CHILD, "done"], env=env, check=True, timeout=60)
    holder = subprocess.Popen(
        [sys.executable, "-c", _CHILD, "hold"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"holding\n"
        registry = exposition_registry(tmp_path, None, [])
        assert _value(registry, "evalsvc_compile_cache_total", outcome="miss") == 3
        assert (
            _value(registry, "evalsvc_stage_duration_seconds_count", stage="compile", worker_kind="compile")
            == 3
        )
        assert _value(registry, "evalsvc_inflight_jobs", worker_kind="compile", worker="c-1") == 1
    finally:
        os.kill(holder.pid, signal.SIGKILL)  # dies holding a job, without a word
        holder.wait(timeout=10)
    text = generate_latest(exposition_registry(tmp_path, None, [])).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    inflight = families.get("evalsvc_inflight_jobs")  # the dead process's live gauge is gone
    assert inflight is None or sum(s.value for s in inflight.samples) == 0, text
    assert _value(exposition_registry(tmp_path, None, []), "evalsvc_compile_cache_total", outcome="miss") == 3
