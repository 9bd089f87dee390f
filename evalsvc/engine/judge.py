"""The trusted judge: secret seeds, comparisons, the candidate's timing, the verdict.

Neither side's code runs here. The candidate runs in a runner process; the task's code (its Model,
inputs, baselines) in a process of its own (reference.py). The judge draws the seeds, asks each side for
data, compares, and decides; the reference's outputs never reach the candidate's process.

`Judge` runs an evaluation's steps in order (`Judge._evaluate`); each step is a module of its own:
runner_session.py (asking the runner, its replies turned into verdicts), trials.py (correctness),
candidate_timing.py (calibration, rounds, refusals), evaluation_baselines.py (eager, torch.compile),
plausibility.py (roofline, review) and candidate_profile.py (profiler trace, Nsight Compute).
"""

from __future__ import annotations

import json
import logging
import random
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from evalsvc.core.options import EvalOptions
from evalsvc.core.pools import VetPolicy, VetRecord
from evalsvc.core.profiles import CandidateProfile, ReferenceProfile, Roofline
from evalsvc.core.results import Correctness, FailureKind, Finding, Status, Timings
from evalsvc.core.tasks import TaskSpec
from evalsvc.engine.baselines import BaselineCache
from evalsvc.engine.candidate_profile import nsight, trace
from evalsvc.engine.candidate_timing import (
    attributed,
    calibrate_runner,
    code_pages,
    cpu_clock,
    library_beside_eager,
    own_libraries,
    refuse_disagreeing,
    refuse_written_code,
    time_candidate_rounds,
    time_graph,
    where_time_went,
)
from evalsvc.engine.device_info import device_name
from evalsvc.engine.evaluation_baselines import EvaluationBaselines
from evalsvc.engine.gpu_schedule import GpuSchedule
from evalsvc.engine.hardware import task_roofline
from evalsvc.engine.judged_timing import RoundRunner, as_check
from evalsvc.engine.launcher import RunnerLauncher
from evalsvc.engine.ncu import NcuProbe
from evalsvc.engine.plausibility import Rooflines, implausible
from evalsvc.engine.reference import Reference, TaskProcesses
from evalsvc.engine.runner_session import RunnerSession, Stop
from evalsvc.engine.timing import TimingPolicy
from evalsvc.engine.trials import TaskQuality, Trials
from evalsvc.sandboxed.runner import cpu_device_threads, keep_freed_memory

progress = logging.getLogger("evalsvc.progress")  # stage by stage, for a person waiting (`evalsvc eval`)
# Candidates faster than this are also timed from CUDA-graph replays, display only (docs/performance.md).
GRAPH_TIMING_BELOW_MS = 0.025


@dataclass
class Verdict:
    status: Status
    message: str | None = None
    correctness: Correctness | None = None
    timings: Timings = field(default_factory=Timings)
    findings: list[Finding] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    review: list[Finding] = field(default_factory=list)  # correct, but its speed is not believed
    task_warnings: list[str] = field(default_factory=list)
    roofline: Roofline | None = None
    profile: CandidateProfile | None = None  # display-only: mostly measured in the candidate's process
    failure: FailureKind | None = None


def timing_policy(options: EvalOptions) -> TimingPolicy:
    return TimingPolicy(budget_s=options.timing_budget_s, target_rel_ci=options.target_rel_ci)


class Judge:
    """Thread-safe: a GPU worker runs several evaluations at once on one judge. They share the device for
    their untimed work and take it alone (`quiet`) for every timing."""

    def __init__(
        self, device: str, launcher: RunnerLauncher, baselines: BaselineCache, ncu: NcuProbe | None = None
    ) -> None:
        self.device = torch.device(device)
        keep_freed_memory()  # freed memory reused: the judge holds inputs and outputs of every trial
        if self.device.type == "cpu":
            cpu_device_threads()  # no pool of the judge's own threads spinning beside a timed runner
        self.launcher = launcher
        self.tasks = TaskProcesses(launcher)
        self.baselines = baselines
        self.ncu = ncu
        self.gpu = GpuSchedule()
        self.baseline_runs = EvaluationBaselines(baselines, self.device, self.quiet)
        # Runners make input sets from seeds on a GPU (no copy through the host); on the CPU device making
        # a set costs more than copying it through shared memory (a 80 MB ReLU's trials: 1.67 s against
        # 0.97 s on the CPU machine), so sets are sent there.
        self.seeded_inputs = self.device.type == "cuda"
        self.quality = TaskQuality()  # per task, once per process
        self.rooflines = Rooflines(self.device)  # per task, once per process

    def evaluate(self, task: TaskSpec, artifact: Path, options: EvalOptions) -> Verdict:
        """InvalidTask or reference.ReferenceFailed when the task's own code fails (a task that does not
        load is found before any runner starts). The runner's start is waited for outside the device
        share: it launches no kernel, so other evaluations keep timing meanwhile (docs/performance.md)."""
        with self.tasks.using(task) as process:
            handle = self.launcher.start(artifact)
            session = RunnerSession(handle, self.launcher.limits, self.seeded_inputs)
            seeds = [secrets.randbits(62) for _ in range(options.trials or task.meta.trials)]
            seeds += [secrets.randbits(62) for _ in range(options.timing_pool + 2)]
            try:
                start_failed = session.ready()
                with self.gpu.shared():
                    reference = Reference(process, seeds[0])
                try:
                    with self.gpu.shared():
                        return self._evaluate(reference, seeds, artifact, options, session, start_failed)
                finally:
                    reference.release()
            finally:
                handle.close()
                self.launcher.prestart()

    def close(self) -> None:
        """Stop the task processes and the spare runners (worker shutdown, tests)."""
        self.tasks.close()
        self.launcher.close()

    def vet(self, task: TaskSpec, policy: VetPolicy, device_class: str) -> VetRecord:
        """pools.vet on this device, in the task's own process, the device alone (it times)."""
        with self.quiet():
            return self.tasks.vet(task, policy, device_class, device_name(self.device), self.baselines)

    def profile(self, task: TaskSpec) -> ReferenceProfile:
        """The task's reference profile, made in its own process, the device alone (it times); its roofline
        from this worker's measured peaks."""
        with self.quiet():
            profile = self.tasks.profile(task, compile_baseline=True)
        meta = task.meta
        eager_ms = profile.eager.total_us / 1e3 or None
        roof = task_roofline(self.device, profile.work, meta.precision.value, meta.tf32, eager_ms)
        return profile.model_copy(update={"roofline": roof})

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """The device alone for timing: no kernel or host work of another evaluation of this process beside
        it, and on the CPU device no runner starting (also what a GPU worker's vetting and reference
        profiling take)."""
        with self.gpu.alone():
            if self.device.type == "cpu":  # a start takes the cores a CPU timing runs on; on a GPU it may run
                self.launcher.settle()
            yield

    def _evaluate(
        self,
        ref: Reference,
        seeds: list[int],
        artifact: Path,
        options: EvalOptions,
        session: RunnerSession,
        start_failed: Stop | None,
    ) -> Verdict:
        """The evaluation's steps in order: the task's checks, the runner prepared and calibrated on the
        null candidate, the candidate loaded and its trials, its timing and the refusals that follow it, a
        last trial, display-only graph timing and profile; then, the runner gone, the baselines, the
        review of its speed and Nsight Compute."""
        meta = ref.spec.meta
        handle = session.handle
        n_trials = len(seeds) - options.timing_pool - 2
        verdict = Verdict(Status.OK, seeds=seeds)
        verdict.task_warnings = self.quality.warnings(ref)
        relative = meta.relative_check or bool(verdict.task_warnings)
        verdict.correctness = Correctness(atol=meta.atol, rtol=meta.rtol, relative_check=relative)
        trials = Trials(session, ref, verdict.correctness, verdict.task_warnings)
        policy = timing_policy(options)
        rng = random.Random(secrets.randbits(64))  # the judge's draws: checked calls, round sizes, extras
        try:
            if start_failed is not None:
                raise start_failed
            self.gpu.let_timing_pass()  # between steps of untimed work, a waiting timing goes first
            probe_seeds = seeds[n_trials + 1 : n_trials + 1 + options.timing_pool]
            probe: list[list[Any]] = [ref.inputs(s) for s in probe_seeds]
            session.prepare(ref, probe, probe_seeds, ref.forward(probe[0]), policy)
            rounds = RoundRunner(
                session.call_asker(),
                ref.inputs,
                ref.forward,
                as_check(meta.atol, meta.rtol, verdict.correctness.relative_check),
                rng,
                seeded=session.makes_inputs,
                outputs_on=self.device.type,
                cpu_clock=cpu_clock(handle, self.device),
            )
            own = own_libraries(handle)
            with self.quiet(), attributed(handle, self.device) as null_time:
                overhead = calibrate_runner(rounds, policy, rng, self.launcher.settle)
            code_before = code_pages(handle, self.device)  # before the candidate is imported
            self.gpu.let_timing_pass()
            session.load(ref)
            trial_seeds = seeds[1 : n_trials + 1]
            progress.info("correctness: %d trials on fresh random inputs", len(trial_seeds))
            for t, seed in enumerate(trial_seeds):
                self.gpu.let_timing_pass()
                trials.run(t, seed, candidate_first=(t == 0), repeat=(t == 1))
            verdict.timings.autotune = trials.autotune
            progress.info("timing the candidate")
            with self.quiet(), attributed(handle, self.device) as candidate_time:
                time_candidate_rounds(rounds, policy, rng, overhead, verdict.timings, self.device)
            refuse_written_code(code_before, handle, self.device)
            library = None
            if not _interpreted(artifact, self.device):  # the interpreter computes in NumPy: library time
                library = where_time_went(null_time, candidate_time, rounds.calls, own, verdict.timings)
            # after: a library's kernel is that, forged or not
            refuse_disagreeing(verdict.timings, self.device)
            trials.run(n_trials, seeds[-1], candidate_first=True)
            assert verdict.timings.candidate is not None  # set by time_candidate_rounds, or it raised
            if self.device.type == "cuda" and verdict.timings.candidate.median_ms < GRAPH_TIMING_BELOW_MS:
                with self.quiet():  # display only, the verdict settled
                    time_graph(session, probe[0], probe_seeds[0], verdict.timings)
                    self.baseline_runs.eager_graph(ref, probe[0], options, verdict.timings)
            if options.profile:
                with self.quiet():
                    verdict.profile = trace(session, probe[0])
        except Stop as stop:
            verdict.status, verdict.message, verdict.failure = stop.status, stop.message, stop.failure
            if stop.rule:
                verdict.findings.append(Finding(rule=stop.rule, message=stop.message))
            return verdict
        finally:
            handle.close()
        progress.info("timing the baselines (eager%s)", ", torch.compile" if options.compile_baseline else "")
        self.baseline_runs.measure(ref, probe_seeds, options, policy, verdict.timings, rng)
        if (refused := library_beside_eager(library, verdict.timings)) is not None:
            verdict.status, verdict.message = refused.status, refused.message
            verdict.findings.append(Finding(rule=refused.rule, message=refused.message))
            return verdict
        verdict.roofline = self.rooflines.of(ref, probe[0], verdict.timings)
        verdict.review = implausible(self.device, verdict.timings, verdict.roofline, options)
        if verdict.profile is not None:
            with self.quiet(), self.launcher.borrowed_uid() as uid:
                nsight(verdict.profile, self.device, self.ncu, artifact, ref, probe[0], uid)
        return verdict


def _interpreted(artifact: Path, device: torch.device) -> bool:
    """A Triton artifact on the CPU device: its kernels run in Triton's interpreter (NumPy)."""
    try:
        manifest = json.loads((artifact / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    return device.type == "cpu" and isinstance(manifest, dict) and manifest.get("format") == "triton"
