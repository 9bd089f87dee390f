"""What a worker process holds for its whole life: settings, the system of record, and its engine half."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from functools import cached_property
from typing import TYPE_CHECKING, Any

import redis

from evalsvc.core.outcomes import compile_failure, failure
from evalsvc.core.pools import VetPolicy, VetRecord, vet_error
from evalsvc.core.profiles import DeviceFacts
from evalsvc.core.results import EvaluationResult, FailureKind, Status
from evalsvc.queues import COMPILE_QUEUE, EVALUATE_TASK, ROUTE_TASK
from evalsvc.records.documents import Job, JobKind, State, WorkerInfo
from evalsvc.records.stores import Records
from evalsvc.redis_clients import worker_redis
from evalsvc.sandbox.base import SandboxUnavailable, sandbox_job
from evalsvc.settings import CompileBackend, Settings
from evalsvc.store.baselines import RedisBaselineCache
from evalsvc.wiring import make_store, sandbox_owner
from workers.celery_app import app

if TYPE_CHECKING:
    from evalsvc.sandbox.docker_sandbox import DockerSandbox

log = logging.getLogger("evalsvc.worker")

ROUTE_RECHECK_S = 2.0  # how often a compiled job parked for want of a live GPU worker looks for one again


class Redeliver(Exception):
    """The evaluation failed on our side before any candidate code ran: the job goes back to the queue."""


class built_once(cached_property):
    """`cached_property` that builds once when threads race for it (Python 3.12 dropped its lock): the
    evaluations in flight on a GPU worker share one evaluator, so one launcher and one set of runner uids."""

    _lock = threading.RLock()

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        with self._lock:
            return super().__get__(instance, owner)


class WorkerContext:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.redis = worker_redis(settings)
        self.records = Records(self.redis, retention_s=settings.retention_s)
        self.jobs = self.records.jobs  # what the task bodies read and write
        self.tasks = self.records.tasks
        self.profiles = self.records.profiles
        self.workers = self.records.workers
        self.pools = self.records.catalog
        self.store = make_store(settings)
        self._probe: DockerSandbox | None = None

    @built_once
    def compiler(self):
        from evalsvc.wiring import make_compiler

        return make_compiler(self.settings, self.store)

    @built_once
    def baselines(self) -> RedisBaselineCache:
        """The fleet's baseline cache: filled by vetting or by the first evaluation of a task."""
        return RedisBaselineCache(self.redis)

    @built_once
    def evaluator(self):
        from evalsvc.wiring import make_evaluator

        return make_evaluator(self.settings, self.store, self.baselines)

    def vet(self, task_id: str, policy: VetPolicy, run: str | None = None) -> VetRecord | None:
        """Vet one registered task on this worker's device and store its record (None: no such task)."""
        task = self.tasks.get_task(task_id)
        if task is None:
            return None
        try:
            record = self.evaluator.judge.vet(task, policy, self.settings.device_class)
        except Exception as e:  # a bug of ours: the task is held back (rejected) until vetted again
            log.exception("vetting %s failed", task_id)
            record = vet_error(task_id, self.settings.device_class, f"{type(e).__name__}: {e}")
        record.run = run
        self.pools.put_vet(record)
        return record

    def finish(self, job: Job, result: EvaluationResult | None = None, **kw: object) -> bool:
        written = self.jobs.finish(job, result=result, **kw)  # type: ignore[arg-type]
        if not written:
            log.info("job %s was already done; result of this attempt dropped", job.id)
        return written

    def compile_and_route(self, job: Job) -> None:
        task = self.tasks.get_task(job.task_id) if job.task_id else None
        with sandbox_job(job.id):  # its containers are labelled with the job
            outcome = self.compiler.compile(job.solution, bool(task and task.meta.allow_vendor_libs), task)
        job.compile_report = outcome.report
        job.artifact_key = outcome.artifact_key
        if job.kind is JobKind.COMPILE:
            self.finish(
                job,
                compile_failure(
                    outcome.status, outcome.message, outcome.report, outcome.findings, job.options
                )
                if outcome.status is not Status.OK
                else None,
                report=outcome.report,
            )
            return
        if outcome.status is not Status.OK or outcome.artifact_key is None:
            self.finish(
                job,
                compile_failure(
                    outcome.status, outcome.message, outcome.report, outcome.findings, job.options
                ),
            )
            return
        self.route(job, time.time() + self.settings.route_wait_s)

    def route(self, job: Job, deadline: float, recheck: bool = False) -> None:
        """Send a compiled job to the least busy live GPU worker of its class. While there is none (a GPU
        worker restarting, heartbeats lost with a Redis restart, a class nobody serves) the job is parked
        until `deadline` (wall clock): saved with its build and checked again `ROUTE_RECHECK_S` later by a
        `route_job` message, so that it holds no compile slot meanwhile (a slot held for `route_wait_s`
        made every evaluation queued behind two such jobs wait two minutes). At the deadline it fails."""
        queue = self.workers.gpu_queue(job.device_class)
        if queue is not None:
            job.queue = queue
            job.attempts = 0
            if self.jobs.advance(job, State.RUNNING):
                app.send_task(EVALUATE_TASK, args=[job.id], queue=queue)
            return
        if time.time() >= deadline:
            self.finish(
                job,
                failure(
                    Status.INTERNAL_ERROR,
                    f"no live GPU worker serves device class {job.device_class!r} "
                    f"(waited {self.settings.route_wait_s:g} s)",
                    job.options,
                    compile=job.compile_report,
                ),
            )
            return
        # Saved (the build with it) and counted as progress, so the stall sweep leaves it alone; the message
        # names this save, so a duplicate of it (the broker's redelivery) finds it stale and ends.
        if not self.jobs.advance(job, State.COMPILING):
            return  # finished meanwhile (a redelivered twin)
        if not recheck:
            log.warning(
                "no live GPU worker serves %r: job %s waits for one until %.0f s from now, holding no slot",
                job.device_class,
                job.id,
                deadline - time.time(),
            )
        args = [job.id, deadline, job.updated_at]
        app.send_task(ROUTE_TASK, args=args, queue=COMPILE_QUEUE, countdown=ROUTE_RECHECK_S)

    def evaluate(self, job: Job) -> None:
        task = self.tasks.get_task(job.task_id or "")
        if task is None:
            self.finish(job, failure(Status.INTERNAL_ERROR, f"task {job.task_id} is gone", job.options))
            return
        assert job.artifact_key is not None and job.compile_report is not None
        result = self.evaluator.evaluate(
            task, job.solution, job.artifact_key, job.compile_report, job.options
        )
        if result.failure is FailureKind.RUNNER_START_FAILED and job.attempts < self.settings.max_attempts:
            # A worker stopping (its process group signalled, the forkserver gone) or a host out of runner
            # resources: nothing about the candidate. Another delivery decides it; the last one reports this.
            log.warning("job %s: %s; delivering it again", job.id, result.message)
            raise Redeliver(result.message or "the runner did not start")
        if job.task_id:
            self.tasks.add_task_warnings(job.task_id, result.task_warnings)
        self.finish(job, result)

    def profile_task(self, task_id: str, device_class: str) -> None:
        """Make a task's reference profile on this worker's device and store it (errors included)."""
        record = self.profiles.get_profile(task_id, device_class)
        task = self.tasks.get_task(task_id)
        if record is None or record.state is State.DONE:
            return
        record.state = State.RUNNING
        self.profiles.put_profile(record)
        try:
            if task is None:
                raise LookupError(f"task {task_id} is gone")
            record.profile = self.evaluator.judge.profile(task)
        except Exception as e:  # a task that cannot be profiled is an answer, not a lost job
            record.error = f"{type(e).__name__}: {e}"[:2000]
            log.warning("profile of %s failed: %s", task_id, record.error)
        record.state = State.DONE
        self.profiles.put_profile(record)

    def sandbox_problem(self) -> str | None:
        """Why this compile worker cannot build right now (its Docker engine or image is unreachable),
        checked on every heartbeat so that /readyz says it; None when it can. Leftover containers of
        dead pool children are reaped on the way."""
        if self.settings.compile_backend is not CompileBackend.DOCKER:
            return None
        from evalsvc.sandbox.docker_sandbox import DockerSandbox

        if self._probe is None:
            self._probe = DockerSandbox(owner=sandbox_owner(self.settings), image=self.settings.compile_image)
        try:
            self._probe.ping()
            self._probe.reap_leftovers()
        except SandboxUnavailable as e:
            self._probe.close()
            self._probe = None
            return str(e)[:500]
        return None

    def start_heartbeat(
        self, kind: str, queue: str, device: str, device_class: str, facts: DeviceFacts | None = None
    ) -> None:
        info = WorkerInfo(
            queue=queue,
            kind=kind,
            device_class=device_class,
            device=device,
            hostname=socket.gethostname(),
            name=self.settings.worker_name or socket.gethostname(),
            pid=os.getpid(),
            heartbeat_at=time.time(),
            facts=facts,
        )

        def beat() -> None:
            while True:
                info.problem = self.sandbox_problem() if kind == "compile" else None
                info.heartbeat_at = time.time()
                try:
                    self.workers.heartbeat(info)
                except redis.RedisError:
                    log.warning("heartbeat failed: Redis unreachable")
                time.sleep(5)

        threading.Thread(target=beat, name="evalsvc-heartbeat", daemon=True).start()


def current_context() -> WorkerContext:
    return WorkerContext(Settings())
