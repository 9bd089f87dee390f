"""The workers' Prometheus metrics: what happened to each job, measured where the job is handled.

Recorded by `workers/tasks.py` around its calls into the worker context, from the job and result documents
(never inside the engine). Labels are bounded: statuses, milestones, stages and kinds are small fixed sets,
worker names are one per worker, tenants are those of the configured API keys (capped per process all the
same: the worker reads them from job documents), and anti-cheat rule names are capped per process (a rule
name can come from the candidate's own process, so it is never trusted to be few).

With PROMETHEUS_MULTIPROC_DIR set (required for prefork compile workers) the values live in
prometheus-client's per-process files and the exporter aggregates them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from evalsvc.core.results import CompileReport, EvaluationResult, Status
from evalsvc.records.documents import Job, JobKind

STAGES = ("queue_wait", "compile", "evaluate", "end_to_end")
SANDBOX_FAILURES = (
    "compile_timeout",  # the compile sandbox hit its wall-clock limit and was killed
    "compile_internal_error",  # the compile sandbox failed for a reason of ours, not the candidate's
    "runner_timeout",  # the judge's watchdog killed the runner process
    "judge_internal_error",  # the GPU worker's own error while judging
    "job_redelivered",  # a job started again after an attempt whose worker process died
    "job_abandoned",  # a job that kept killing its workers, failed after max_attempts
    "runner_died",  # the candidate's process ended without answering (crash, kill, OOM)
    "runner_start_failed",  # a runner never became ready (the job was delivered again up to max_attempts)
    "sandbox_unavailable",  # the compile sandbox's engine (Docker) was unreachable
    "task_invalid",  # the task could not be loaded or its inputs made (its own process failed)
    "worker_error",  # an unexpected error of ours in the worker around the evaluation
)
STAGE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600)
REWARD_BUCKETS = (-1, -0.5, 0, 0.5, 1, 1.5, 2, 2.5, 3, 4, 5)
MAX_RULES = 64  # distinct rule label values per process; the rest are counted as "other"
MAX_TENANTS = 256  # distinct tenant label values per process; the rest are counted as "other"


class WorkerMetrics:
    """One worker process's metrics, in its own registry (tests build several)."""

    def __init__(self, worker_kind: str, worker: str, registry: CollectorRegistry | None = None) -> None:
        self.worker_kind = worker_kind
        self.worker = worker
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.started = Counter(
            "evalsvc_jobs_started", "job deliveries a worker began", ["worker_kind"], registry=r
        )
        self.results = Counter(
            "evalsvc_results",
            "terminal results, by job kind, status and reward milestone",
            ["job_kind", "status", "milestone"],
            registry=r,
        )
        self.uncertain = Counter(
            "evalsvc_rewards_uncertain",
            "rewards resting on a threshold inside the speedup's 95% interval, by milestone",
            ["milestone"],
            registry=r,
        )
        self.baseline_checks = Counter(
            "evalsvc_baseline_checks",
            "cached baselines re-checked by a short measurement, by kind and outcome (agreed, replaced)",
            ["kind", "outcome"],
            registry=r,
        )
        # Per tenant: evaluations rewarded and their reward magnitudes by sign (mean = (pos - neg) / count).
        # Tenants come from the configured API keys (EVALSVC_API_KEYS) or are "anonymous": a bounded set.
        self.tenant_rewards = Counter(
            "evalsvc_tenant_rewards", "evaluations that got a reward, by tenant", ["tenant"], registry=r
        )
        self.tenant_reward_points = Counter(
            "evalsvc_tenant_reward_points",
            "sum of the magnitudes of rewards, by tenant and sign (for a tenant's mean reward)",
            ["tenant", "sign"],
            registry=r,
        )
        self.reward = Histogram(
            "evalsvc_reward", "reward of finished evaluations", buckets=REWARD_BUCKETS, registry=r
        )
        # With negative buckets a histogram has no _sum (it could fall), so the total is kept as two
        # counters of magnitudes: mean = (positive - negative) / evalsvc_reward_count.
        self.reward_points = Counter(
            "evalsvc_reward_points",
            "sum of the magnitudes of rewards, by sign (for the mean reward)",
            ["sign"],
            registry=r,
        )
        self.stage = Histogram(
            "evalsvc_stage_duration_seconds",
            "queue_wait: queued (or routed) to picked up; compile: the build; evaluate: the judge call; "
            "end_to_end: created to finished. worker_kind: the worker that observed it",
            ["stage", "worker_kind"],
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.compile_cache = Counter(
            "evalsvc_compile_cache", "compile stage lookups by outcome (hit, miss)", ["outcome"], registry=r
        )
        self.compile_fast_path = Counter(
            "evalsvc_compile_fast_path",
            "load_inline builds (cache misses) by path: fast (against the torch stand-in) or full (as "
            "written; the reason is in the compile report's fast_path_reason)",
            ["path"],
            registry=r,
        )
        self.sandbox_failures = Counter(
            "evalsvc_sandbox_failures", "sandbox and worker failures by kind", ["kind"], registry=r
        )
        self.refusals = Counter(
            "evalsvc_refusals",
            "anti-cheat findings by rule; action=refused (status forbidden) or review (not rewarded)",
            ["rule", "action"],
            registry=r,
        )
        self.inflight = Gauge(
            "evalsvc_inflight_jobs",
            "jobs being handled right now",
            ["worker_kind", "worker"],
            multiprocess_mode="livesum",
            registry=r,
        )
        self.gpu_not_ready = Counter(
            "evalsvc_gpu_not_ready_starts",
            "evaluations that started while their GPU was throttled or over the temperature limit",
            registry=r,
        )
        self._rules: set[str] = set()
        self._tenants: set[str] = set()
        # Known label values start at zero, so rates and dashboards have series before the first event.
        self.started.labels(worker_kind)
        self.inflight.labels(worker_kind, worker)
        for sign in ("positive", "negative"):
            self.reward_points.labels(sign)
        for outcome in ("hit", "miss"):
            self.compile_cache.labels(outcome)
        for path in ("fast", "full"):
            self.compile_fast_path.labels(path)
        for kind in SANDBOX_FAILURES:
            self.sandbox_failures.labels(kind)

    # -- recording -------------------------------------------------------------------------------------
    def job_started(self, job: Job, now: float | None = None) -> None:
        """A delivery begins: count it, and the time it waited (since created, or routed to this queue)."""
        now = time.time() if now is None else now
        self.started.labels(self.worker_kind).inc()
        since = job.created_at if self.worker_kind == "compile" else job.updated_at
        self.observe("queue_wait", now - since)
        if job.attempts > 1:
            self.sandbox_failures.labels("job_redelivered").inc()

    @contextmanager
    def in_flight(self) -> Iterator[None]:
        gauge = self.inflight.labels(self.worker_kind, self.worker)
        gauge.inc()
        try:
            yield
        finally:
            gauge.dec()

    def observe(self, stage: str, seconds: float) -> None:
        self.stage.labels(stage, self.worker_kind).observe(max(0.0, seconds))

    def compiled(self, report: CompileReport | None) -> None:
        """The compile stage's report: a cache hit, or a build whose duration counts."""
        if report is None:
            return
        self.compile_cache.labels("hit" if report.cached else "miss").inc()
        if not report.cached:
            self.observe("compile", report.duration_s)
            if report.fast_path is not None:
                self.compile_fast_path.labels("fast" if report.fast_path else "full").inc()

    def finished(self, job: Job, now: float | None = None) -> None:
        """The job's terminal result, written by this attempt (count each job once)."""
        now = time.time() if now is None else now
        self.observe("end_to_end", now - job.created_at)
        result = job.result
        if result is None:  # a compile-only job that compiled
            self.results.labels(job.kind.value, Status.OK.value, "none").inc()
            return
        milestone = "none" if result.milestone is None else str(result.milestone)
        self.results.labels(job.kind.value, result.status.value, milestone).inc()
        if job.kind is JobKind.EVALUATE and result.reward is not None:
            self.reward.observe(result.reward)
            sign = "positive" if result.reward >= 0 else "negative"
            self.reward_points.labels(sign).inc(abs(result.reward))
            tenant = self._tenant(job.tenant)
            self.tenant_rewards.labels(tenant).inc()
            self.tenant_reward_points.labels(tenant, sign).inc(abs(result.reward))
            if result.uncertain:
                self.uncertain.labels(milestone).inc()
            for check in result.timings.baseline_checks:
                self.baseline_checks.labels(check.kind, "replaced" if check.replaced else "agreed").inc()
        action = "refused" if result.status is Status.FORBIDDEN else "review"
        for finding in result.findings:
            self.refusals.labels(self._rule(finding.rule), action).inc()
        kind = sandbox_failure(result, self.worker_kind)
        if kind is not None:
            self.sandbox_failures.labels(kind).inc()

    def _rule(self, rule: str) -> str:
        return _capped(self._rules, rule, MAX_RULES)

    def _tenant(self, tenant: str) -> str:
        return _capped(self._tenants, tenant, MAX_TENANTS)


def _capped(seen: set[str], value: str, cap: int) -> str:
    """`value` as a label value, or "other" once `cap` distinct values have been used."""
    if value in seen:
        return value
    if len(seen) >= cap:
        return "other"
    seen.add(value)
    return value


def sandbox_failure(result: EvaluationResult, worker_kind: str) -> str | None:
    """Which sandbox failure a result is, if any (a worker's own kind says which sandbox ran)."""
    if result.failure is not None:
        return result.failure.value
    if result.status is Status.TIMEOUT:
        return "compile_timeout" if worker_kind == "compile" else "runner_timeout"
    if result.status is Status.INTERNAL_ERROR:
        if worker_kind != "compile":
            return "judge_internal_error"
        # On the compile side an internal error after a good build is a routing failure, not the sandbox.
        if result.compile is None or not result.compile.ok:
            return "compile_internal_error"
    return None
