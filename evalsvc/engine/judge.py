"""The trusted judge: secret seeds, comparisons, the candidate's timing, the verdict.

Neither side's code runs here. The candidate runs in a runner process; the task's code (its Model,
inputs, baselines) in a process of its own (reference.py). The judge draws the seeds, asks each side for
data, compares, and decides; the reference's outputs never reach the candidate's process.
"""

from __future__ import annotations

import contextlib
import logging
import random
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path
from typing import Any

import torch

from evalsvc.core.options import EvalOptions
from evalsvc.core.pools import VetPolicy, VetRecord
from evalsvc.core.profiles import CandidateProfile, KernelTrace, ReferenceProfile, Roofline, TaskWork
from evalsvc.core.results import (
    Correctness,
    FailureKind,
    Finding,
    Status,
    Timings,
    TimingStats,
    TrialCheck,
)
from evalsvc.core.stats import summarize
from evalsvc.core.tasks import Arithmetic, Precision, TaskSpec
from evalsvc.engine.baseline_timing import BaselineTimer
from evalsvc.engine.baselines import BaselineCache, BaselineKeys, baseline_keys
from evalsvc.engine.codec import BadMessage
from evalsvc.engine.commitment import output_tensors
from evalsvc.engine.compare import compare
from evalsvc.engine.cpu_attribution import Attribution, CpuSampler, FileId, SamplerError, file_identity
from evalsvc.engine.device_info import device_name
from evalsvc.engine.gpu_schedule import GpuSchedule
from evalsvc.engine.hardware import task_roofline
from evalsvc.engine.judged_timing import (
    Overhead,
    RoundRunner,
    TimingRefused,
    as_check,
    calibrate,
    confirmed_interval,
    judge_figure,
    library_excess,
    process_cpu_ms,
    refuse_disagreement,
    refuse_library_compute,
    time_candidate,
)
from evalsvc.engine.launcher import RunnerDied, RunnerHandle, RunnerLauncher, RunnerTimeout
from evalsvc.engine.ncu import NcuProbe
from evalsvc.engine.profiling import nbytes
from evalsvc.engine.reference import Reference, ReferenceFailed, TaskProcesses
from evalsvc.engine.taskload import input_digest, quality_warnings
from evalsvc.engine.timing import TimingPolicy, method_name
from evalsvc.sandboxed.runner import cpu_device_threads, keep_freed_memory

MAX_POISON_BYTES = 1 << 30
log = logging.getLogger("evalsvc.judge")
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


class _InputsDiffer(Exception):
    """The runner could not make the judge's inputs from their seeds; they are sent instead."""


class _Stop(Exception):
    """Ends an evaluation early with a verdict."""

    def __init__(
        self, status: Status, message: str, rule: str | None = None, failure: FailureKind | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.rule = rule
        self.failure = failure


# A kernel may beat a copy's bandwidth a little (reads alone, writes still in L2 when the timer stops);
# past this factor over the measured peak it is not believed.
ROOFLINE_SLACK = 1.25


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
        self._lock = threading.Lock()  # the per-task caches below
        self.baseline_timer = BaselineTimer(baselines, self.quiet)
        # Runners make input sets from seeds on a GPU (no copy through the host); on the CPU device making
        # a set costs more than copying it through shared memory (a 80 MB ReLU's trials: 1.67 s against
        # 0.97 s on the CPU machine), so sets are sent there.
        self.seeded_inputs = self.device.type == "cuda"
        self._quality: dict[str, list[str]] = {}
        self._work: dict[str, TaskWork] = {}

    def evaluate(self, task: TaskSpec, artifact: Path, options: EvalOptions) -> Verdict:
        """InvalidTask or reference.ReferenceFailed when the task's own code fails (a task that does not
        load is found before any runner starts). The runner's start is waited for outside the device
        share: it launches no kernel, so other evaluations keep timing meanwhile (docs/performance.md)."""
        with self.tasks.using(task) as process:
            handle = self.launcher.start(artifact)
            seeds = [secrets.randbits(62) for _ in range(options.trials or task.meta.trials)]
            seeds += [secrets.randbits(62) for _ in range(options.timing_pool + 2)]
            try:
                start_failed = self._runner_ready(handle)
                with self.gpu.shared():
                    reference = Reference(process, seeds[0])
                try:
                    with self.gpu.shared():
                        return self._evaluate(reference, seeds, artifact, options, handle, start_failed)
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
        handle: RunnerHandle,
        start_failed: _Stop | None,
    ) -> Verdict:
        meta = ref.spec.meta
        n_trials = len(seeds) - options.timing_pool - 2
        verdict = Verdict(Status.OK, seeds=seeds)
        verdict.task_warnings = self._task_quality(ref)
        relative = meta.relative_check or bool(verdict.task_warnings)
        verdict.correctness = Correctness(atol=meta.atol, rtol=meta.rtol, relative_check=relative)
        policy = self._policy(options)
        rng = random.Random(secrets.randbits(64))  # the judge's draws: checked calls, round sizes, extras
        try:
            if start_failed is not None:
                raise start_failed
            self.gpu.let_timing_pass()  # between steps of untimed work, a waiting timing goes first
            probe_seeds = seeds[n_trials + 1 : n_trials + 1 + options.timing_pool]
            probe: list[list[Any]] = [ref.inputs(s) for s in probe_seeds]
            self._prepare(handle, ref, probe, probe_seeds, ref.forward(probe[0]), policy)
            rounds = RoundRunner(
                partial(self._ask, handle, timeout_s=self.launcher.limits.call_timeout_s),
                ref.inputs,
                ref.forward,
                as_check(meta.atol, meta.rtol, verdict.correctness.relative_check),
                rng,
                seeded=handle.makes_inputs and self.seeded_inputs,
                cpu_clock=self._cpu_clock(handle),
            )
            own_libraries = {
                i for p in (handle.scratch / "artifact").rglob("*.so") if (i := file_identity(str(p)))
            }
            with self.quiet(), self._attributed(handle) as null_time:
                overhead = self._calibrate(rounds, policy, rng)
            self.gpu.let_timing_pass()
            self._load(handle, ref)
            trial_seeds = seeds[1 : n_trials + 1]
            progress.info("correctness: %d trials on fresh random inputs", len(trial_seeds))
            for t, seed in enumerate(trial_seeds):
                first = t == 0
                self.gpu.let_timing_pass()
                self._trial(handle, ref, t, seed, first, verdict, repeat=(t == 1))
            progress.info("timing the candidate")
            with self.quiet(), self._attributed(handle) as candidate_time:
                self._time_candidate(rounds, policy, rng, overhead, verdict.timings)
            self._where_time_went(null_time, candidate_time, rounds.calls, own_libraries, verdict.timings)
            self._refuse_disagreement(verdict.timings)  # after: a library's kernel is that, forged or not
            self._trial(handle, ref, n_trials, seeds[-1], candidate_first=True, verdict=verdict)
            assert verdict.timings.candidate is not None  # set by _time_candidate, or it raised
            if self.device.type == "cuda" and verdict.timings.candidate.median_ms < GRAPH_TIMING_BELOW_MS:
                with self.quiet():
                    self._time_graphs(handle, ref, probe[0], probe_seeds[0], options, verdict.timings)
            if options.profile:
                with self.quiet():
                    verdict.profile = self._trace(handle, probe[0])
        except _Stop as stop:
            verdict.status, verdict.message, verdict.failure = stop.status, stop.message, stop.failure
            if stop.rule:
                verdict.findings.append(Finding(rule=stop.rule, message=stop.message))
            return verdict
        finally:
            handle.close()
        progress.info("timing the baselines (eager%s)", ", torch.compile" if options.compile_baseline else "")
        self._baselines(ref, probe_seeds, options, verdict.timings, rng)
        verdict.roofline = self._roofline(ref, probe[0], verdict.timings)
        verdict.review = self._implausible(verdict.timings, verdict.roofline, options)
        if verdict.profile is not None:
            with self.quiet(), self.launcher.borrowed_uid() as uid:
                self._nsight(verdict.profile, artifact, ref, probe[0], uid)
        return verdict

    def _roofline(self, ref: Reference, inputs: list[Any], timings: Timings) -> Roofline | None:
        """Minimum bytes and FLOPs of the task (once per task) against this device's measured peaks;
        None when they cannot be had (a reference the FLOP counter refuses), never a failed evaluation."""
        try:
            task_id = ref.spec.id
            if task_id not in self._work:
                work = ref.work(inputs)
                with self._lock:
                    self._work[task_id] = work
            median = timings.candidate.median_ms if timings.candidate else None
            meta = ref.spec.meta
            return task_roofline(self.device, self._work[task_id], meta.precision.value, meta.tf32, median)
        except Exception:
            log.exception("no roofline for task %s", ref.spec.id)
            return None

    def _trace(self, handle: RunnerHandle, inputs: list[Any]) -> CandidateProfile:
        """A profiler trace in the runner, in separate runs after the timed ones. Whatever goes wrong here
        is a note: the verdict is already decided."""
        profile = CandidateProfile()
        try:
            msg = {"op": "profile", "inputs": inputs, "runs": 3}
            reply = self._ask(handle, msg, self.launcher.limits.call_timeout_s * 3)
            profile.trace = KernelTrace.model_validate(reply["trace"])
        except (_Stop, ValueError, KeyError, TypeError) as e:
            profile.notes.append(f"profiler trace failed: {str(e)[:300]}")
        return profile

    def _nsight(
        self,
        profile: CandidateProfile,
        artifact: Path,
        ref: Reference,
        inputs: list[Any],
        uid: int,
    ) -> None:
        """Nsight Compute's metrics for the first kernels, in a process of its own (optional)."""
        if self.device.type != "cuda":
            profile.notes.append("kernels, launch gaps and Nsight Compute metrics need a GPU device")
        elif self.ncu is None:
            profile.notes.append("Nsight Compute is not available on this worker (ncu absent or not enabled)")
        else:
            load = ref.load_message(ref.spec.meta.tf32)
            try:
                profile.ncu, note = self.ncu.profile(artifact, load, inputs, self.device, uid)
            except Exception as e:  # our own step failed: a note, never a failed evaluation
                profile.ncu, note = [], f"Nsight Compute step failed: {type(e).__name__}: {e}"[:300]
            if note:
                profile.notes.append(note)

    def _implausible(self, timings: Timings, roof: Roofline | None, options: EvalOptions) -> list[Finding]:
        """Claims the hardware cannot back: faster than moving the task's minimum bytes at the device's
        measured peak bandwidth (with `ROOFLINE_SLACK`), or more than `options.max_speedup` over eager.
        Not on the CPU device: its caches can exceed the timing's flush and hold a whole task."""
        cand, eager = timings.candidate, timings.eager
        if cand is None:
            return []
        out: list[Finding] = []
        if eager is not None and cand.median_ms * options.max_speedup < eager.median_ms:
            out.append(
                Finding(
                    rule="implausible_speedup",
                    message=f"{eager.median_ms / cand.median_ms:.0f}x faster than eager, over the "
                    f"{options.max_speedup:g}x bound: flagged for review, not rewarded as a speedup",
                )
            )
        if self.device.type == "cuda" and roof is not None:
            peak = roof.peak_bandwidth_bps * ROOFLINE_SLACK
            floor_ms = roof.min_bytes / peak * 1e3
            if cand.median_ms < floor_ms:
                out.append(
                    Finding(
                        rule="faster_than_memory_roofline",
                        message=f"median {cand.median_ms * 1e3:.1f} µs is under the {floor_ms * 1e3:.1f} µs "
                        f"needed to read the inputs and write the outputs ({roof.min_bytes / 1e6:.1f} MB) at "
                        f"{peak / 1e12:.2f} TB/s ({ROOFLINE_SLACK:g}x the measured peak): flagged for "
                        "review, not rewarded as a speedup",
                    )
                )
        return out

    def _time_graphs(
        self,
        handle: RunnerHandle,
        ref: Reference,
        inputs: list[Any],
        seed: int,
        options: EvalOptions,
        timings: Timings,
    ) -> None:
        """Launch-overhead-free timings of a small kernel and of eager (cached like the baselines), for
        display. Runs after the verdict is settled; a candidate that cannot be captured in a graph simply
        gets none."""
        explicit = {"op": "time_graph", "inputs": inputs}
        try:
            reply = self._ask_made(handle, explicit, partial(_seeded, explicit, seed), nbytes(inputs))
            timings.candidate_graph = TimingStats.model_validate(reply["stats"])
        except (_Stop, ValueError):
            pass  # eager's is still shown
        key = self._baseline_keys(ref.spec, options).eager_graph
        timings.eager_graph = self.baselines.get(key)
        if timings.eager_graph is None:
            try:
                timings.eager_graph = ref.time_graph(inputs)
            except ReferenceFailed:
                return
            if timings.eager_graph is not None:
                self.baselines.put(key, timings.eager_graph)

    def _task_quality(self, ref: Reference) -> list[str]:
        """Checked once per task and process, on two fixed input sets."""
        task_id = ref.spec.id
        if task_id not in self._quality:
            outs = [ref.forward(ref.inputs(s)) for s in (11, 12)]
            meta = ref.spec.meta
            warnings = quality_warnings(outs[0], outs[1], meta.atol, meta.rtol)
            with self._lock:
                self._quality[task_id] = warnings
        return list(self._quality[task_id])

    def _ask(
        self, handle: RunnerHandle, msg: dict[str, Any], timeout_s: float, reply_bytes: int = 0
    ) -> dict[str, Any]:
        try:
            reply = handle.request(msg, timeout_s, reply_bytes)
        except RunnerTimeout as e:
            raise _Stop(Status.TIMEOUT, f"the candidate did not finish '{msg['op']}': {e}") from None
        except RunnerDied as e:
            raise _Stop(Status.RUNTIME_ERROR, str(e), failure=FailureKind.RUNNER_DIED) from None
        except BadMessage as e:
            raise _Stop(Status.FORBIDDEN, str(e), rule="forged_message") from None
        if not reply["ok"] and reply.get("kind") == "inputs_differ":
            raise _InputsDiffer()
        if not reply["ok"]:
            kind = reply.get("kind")
            status = Status.FORBIDDEN if kind == "forbidden" else Status.RUNTIME_ERROR
            error = str(reply.get("error", "unknown error"))[:4000]
            rule = str(reply.get("rule", "runtime_check"))
            if not re.fullmatch(r"[a-z_]{1,40}", rule):  # a label from the candidate's process: keep it tame
                rule = "runtime_check"
            raise _Stop(status, error, rule=rule if status is Status.FORBIDDEN else None)
        return reply

    def _ask_made(
        self,
        handle: RunnerHandle,
        explicit: dict[str, Any],
        seeded: Callable[[], dict[str, Any]],
        room: int,
        timeout_s: float = 0.0,
    ) -> dict[str, Any]:
        """Ask with input seeds and digests, so the runner makes the inputs on its own device (no copy
        through the host); once it cannot (a task whose inputs do not reproduce from the seed there), send
        them for the rest of the evaluation. A runner that makes other inputs than the judge's only fails
        its own checks: every output is compared with the reference on the judge's inputs."""
        timeout_s = timeout_s or self.launcher.limits.call_timeout_s
        if handle.makes_inputs and self.seeded_inputs:
            try:  # the message carries no tensors: keep room for the reply's (as large as `room`)
                return self._ask(handle, seeded(), timeout_s, reply_bytes=room)
            except _InputsDiffer:
                handle.makes_inputs = False
        try:
            return self._ask(handle, explicit, timeout_s)
        except _InputsDiffer:
            raise _Stop(Status.FORBIDDEN, "the runner refused the judge's inputs", "forged_message") from None

    def _runner_ready(self, handle: RunnerHandle) -> _Stop | None:
        """Wait for the runner's own start (no candidate code has run yet): a failure here is ours, not
        the candidate's."""
        try:
            handle.wait_ready(self.launcher.limits.load_timeout_s)
        except (RunnerTimeout, RunnerDied, BadMessage) as e:
            return _Stop(
                Status.INTERNAL_ERROR,
                f"the runner did not start: {e}",
                failure=FailureKind.RUNNER_START_FAILED,
            )
        return None

    def _load(self, handle: RunnerHandle, ref: Reference) -> None:
        self._ask(handle, ref.load_message(ref.spec.meta.tf32), self.launcher.limits.load_timeout_s)

    def _trial(
        self,
        handle: RunnerHandle,
        ref: Reference,
        t: int,
        seed: int,
        candidate_first: bool,
        verdict: Verdict,
        repeat: bool = False,
    ) -> None:
        """One trial; with `repeat` the candidate also gets the same inputs a second time, so call counting
        and work deferred to the next call show."""
        inputs = ref.inputs(seed)
        size = nbytes(inputs)
        poison = min(MAX_POISON_BYTES, 2 * size)
        explicit = {"op": "run", "inputs": inputs, "poison_bytes": poison}
        seeded = cache(partial(_seeded, explicit, seed))  # built once, only if the runner makes inputs
        if candidate_first:
            reply = self._ask_made(handle, explicit, seeded, size)
            ref_out = ref.forward(inputs)
        else:
            ref_out = ref.forward(inputs)
            reply = self._ask_made(handle, explicit, seeded, size)
        self._check(reply["output"], ref_out, ref.spec, t, candidate_first, verdict)
        if t == 0:
            self._check_arithmetic(ref, inputs, ref_out, reply["output"], verdict)
        if repeat:
            again = self._ask_made(handle, explicit, seeded, size)
            self._check(again["output"], ref_out, ref.spec, t, False, verdict, " (same inputs, second call)")

    def _check_arithmetic(
        self, ref: Reference, inputs: list[Any], ref_out: Any, output: Any, verdict: Verdict
    ) -> None:
        """On an fp32 task: does the first trial's output show reduced-precision inputs the task does not
        allow (precision.py, run in the task's process)? A reference that cannot run in float64 leaves it
        unchecked, with a warning."""
        meta = ref.spec.meta
        corr = verdict.correctness
        assert corr is not None
        policy = meta.arithmetic_policy
        corr.arithmetic = policy.value if meta.precision is Precision.FP32 else meta.precision.value
        if meta.precision is not Precision.FP32 or policy is Arithmetic.ANY:
            return
        found, unchecked = ref.arithmetic(inputs, ref_out, output, policy.allowed())
        if unchecked is not None:
            verdict.task_warnings.append(
                f"arithmetic not checked: the reference does not run in float64 ({unchecked})"[:300]
            )
            return
        corr.arithmetic_checked = True
        if found is not None:
            corr.first_failure = 0
            raise _Stop(Status.INCORRECT, f"trial 0: {found}", rule="reduced_precision")

    def _check(
        self,
        output: Any,
        ref_out: Any,
        task: TaskSpec,
        t: int,
        candidate_first: bool,
        verdict: Verdict,
        context: str = "",
    ) -> None:
        meta = task.meta
        corr = verdict.correctness
        assert corr is not None
        cmp = compare(output, ref_out, meta.atol, meta.rtol, relative=corr.relative_check)
        corr.trials.append(
            TrialCheck(
                trial=t,
                passed=cmp.passed,
                candidate_first=candidate_first,
                max_abs_err=cmp.max_abs_err,
                max_rel_err=cmp.max_rel_err,
                message=cmp.message,
            )
        )
        corr.max_abs_err = max(corr.max_abs_err or 0.0, cmp.max_abs_err or 0.0)
        corr.max_rel_err = max(corr.max_rel_err or 0.0, cmp.max_rel_err or 0.0)
        if not cmp.passed:
            corr.first_failure = t
            raise _Stop(Status.INCORRECT, f"trial {t}{context}: {cmp.message}")

    def _policy(self, options: EvalOptions) -> TimingPolicy:
        return TimingPolicy(budget_s=options.timing_budget_s, target_rel_ci=options.target_rel_ci)

    def _prepare(
        self,
        handle: RunnerHandle,
        ref: Reference,
        probe: list[list[Any]],
        probe_seeds: list[int],
        ref_out: Any,
        policy: TimingPolicy,
    ) -> None:
        """Before the candidate is imported: whether the runner makes inputs from seeds (it is sent the task
        and must reproduce the judge's inputs for a few seeds) or receives them, and the shapes of the null
        candidate's outputs."""
        outputs = [[list(t.shape), str(t.dtype).removeprefix("torch.")] for t in output_tensors(ref_out)]
        base = {
            "op": "prepare",
            "tf32": ref.spec.meta.tf32,
            "outputs": outputs,
            "flush_bytes": policy.flush_bytes,
        }

        def seeded() -> dict[str, Any]:
            digests = [input_digest(p) for p in probe]
            return {**base, "task": ref.spec.model_dump_json(), "seeds": probe_seeds, "digests": digests}

        self._ask_made(handle, base, seeded, 0, self.launcher.limits.load_timeout_s)

    def _cpu_clock(self, handle: RunnerHandle) -> Callable[[], float | None] | None:
        """The runner's CPU time, read from outside it: on the CPU device only (a GPU's time is not it)."""
        pid = handle.proc.pid
        return partial(process_cpu_ms, pid) if self.device.type == "cpu" and pid is not None else None

    def _calibrate(self, rounds: RoundRunner, policy: TimingPolicy, rng: random.Random) -> Overhead:
        """The runner's own cost per call, on the null candidate; a failure here is ours (no candidate code
        has run in the runner yet)."""
        # No runner starting beside the host-bound null rounds on a GPU either (docs/performance.md).
        self.launcher.settle()
        try:
            return calibrate(rounds, policy, rng)
        except (TimingRefused, _Stop) as e:
            raise _Stop(
                Status.INTERNAL_ERROR, f"calibrating the runner failed: {e}", failure=FailureKind.WORKER_ERROR
            ) from None

    @contextmanager
    def _attributed(self, handle: RunnerHandle) -> Iterator[list[Attribution]]:
        """On the CPU device, where the runner's CPU time goes meanwhile, as the kernel samples it
        (cpu_attribution.py); nothing where it cannot be sampled (a GPU, no perf events)."""
        found: list[Attribution] = []
        if self.device.type != "cpu" or handle.proc.pid is None:
            yield found
            return
        sampler = CpuSampler(handle.proc.pid)
        try:
            sampler.start()
        except SamplerError as e:
            log.warning("runner not sampled: %s", e)
            sampler.close()
            yield found
            return
        try:
            yield found
        finally:
            with contextlib.suppress(SamplerError):
                found.append(sampler.stop())
            sampler.close()

    def _where_time_went(
        self,
        null: list[Attribution],
        candidate: list[Attribution],
        calls: dict[str, int],
        own: set[FileId],
        timings: Timings,
    ) -> None:
        """A candidate whose CPU time per call ran mostly in libraries (MKL inside libtorch_cpu, found by
        walking memory with no import to screen) or generated code is refused (`library_compute`)."""
        if not null or not candidate or timings.candidate_judged is None:
            return
        excess = library_excess(null[0], calls.get("null", 0), candidate[0], calls.get("candidate", 0), own)
        timings.candidate_judged.library_share = excess
        timings.candidate_judged.sampled = candidate[0].samples
        try:
            refuse_library_compute(excess, candidate[0])
        except TimingRefused as e:
            raise _Stop(Status(e.status), str(e), rule=e.rule) from None

    def _time_candidate(
        self,
        rounds: RoundRunner,
        policy: TimingPolicy,
        rng: random.Random,
        overhead: Overhead,
        timings: Timings,
    ) -> None:
        """The candidate's rounds, driven, clocked and spot-checked by the judge (judged_timing.py)."""
        try:
            timed = time_candidate(rounds, policy, rng, overhead)
            timings.candidate = summarize(timed.samples_ms, method_name(self.device))
            timings.candidate_judged = timed.judged
        except TimingRefused as e:
            raise _Stop(Status(e.status), str(e), rule=e.rule) from None

    def _refuse_disagreement(self, timings: Timings) -> None:
        assert timings.candidate is not None and timings.candidate_judged is not None
        try:
            refuse_disagreement(timings.candidate.median_ms, timings.candidate_judged, self.device.type)
        except TimingRefused as e:
            raise _Stop(Status(e.status), str(e), rule=e.rule) from None
        if self.device.type == "cpu":
            timings.candidate = confirmed_interval(timings.candidate, timings.candidate_judged)
            timings.candidate_judged.confirmed_high_ms = judge_figure(timings.candidate_judged, "cpu").high_ms

    def _baseline_keys(self, task: TaskSpec, options: EvalOptions) -> BaselineKeys:
        budget, ci = options.timing_budget_s, options.target_rel_ci
        return baseline_keys(task, device_name(self.device), torch.__version__, budget, ci)

    def _baselines(
        self,
        ref: Reference,
        probe_seeds: list[int],
        options: EvalOptions,
        timings: Timings,
        rng: random.Random,
    ) -> None:
        """Eager and torch.compile baselines by the candidate's method (rounds of calls on fresh inputs),
        measured in the task's process: from the cache and re-checked, or measured; `timings` says which
        and how long it took."""
        meta = ref.spec.meta
        keys = self._baseline_keys(ref.spec, options)
        policy = self._policy(options)
        started = time.monotonic()

        def eager(p: TimingPolicy) -> TimingStats | None:
            return ref.time("eager", p, rng.getrandbits(62))

        def compiled(p: TimingPolicy) -> TimingStats | None:
            return ref.time("compiled", p, rng.getrandbits(62), meta.compile_mode)

        timings.eager = self.baseline_timer.eager(keys.eager, eager, policy, timings)
        if options.compile_baseline:
            timings.compile_mode = meta.compile_mode
            compile_ = partial(ref.compile, meta.compile_mode, probe_seeds)
            timings.compiled = self.baseline_timer.compiled(
                keys.compiled, compile_, compiled, policy, timings
            )
        timings.baseline_cached = timings.eager_cached and (
            timings.compiled_cached or not options.compile_baseline
        )
        timings.baselines_measured_s = time.monotonic() - started


def _seeded(explicit: dict[str, Any], seed: int) -> dict[str, Any]:
    """`explicit` with its input set replaced by the set's seed and the judge's digest of it."""
    msg = {k: v for k, v in explicit.items() if k != "inputs"}
    return {**msg, "seed": seed, "digest": input_digest(explicit["inputs"])}
