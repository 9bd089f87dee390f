"""The trusted judge: secret seeds, reference outputs, comparisons, timing of baselines, the verdict.

The candidate runs in a separate runner process; the judge sends it inputs and checks what comes back.
The reference's outputs never leave this process.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from evalsvc.core.hashing import content_hash
from evalsvc.core.options import EvalOptions
from evalsvc.core.results import (
    Correctness,
    FailureKind,
    Finding,
    Status,
    Timings,
    TimingStats,
    TrialCheck,
)
from evalsvc.engine.baselines import BaselineCache
from evalsvc.engine.codec import BadMessage
from evalsvc.engine.compare import compare
from evalsvc.engine.device_info import device_name
from evalsvc.engine.launcher import RunnerDied, RunnerHandle, RunnerLauncher, RunnerTimeout
from evalsvc.engine.taskload import LoadedTask, quality_warnings
from evalsvc.engine.timing import TimingPolicy, measure

MAX_POISON_BYTES = 1 << 30


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
    failure: FailureKind | None = None


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


# Datasheet peak memory bandwidth, bytes/s, by device-name substring: a bound no kernel can beat.
PEAK_BANDWIDTH = {"H200": 4.8e12, "H100": 3.35e12, "A100": 2.04e12, "L40S": 0.864e12, "L4": 0.3e12}


def peak_bandwidth(name: str) -> float | None:
    return next((bw for key, bw in PEAK_BANDWIDTH.items() if key in name), None)


def _nbytes(obj: Any) -> int:
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, list | tuple):
        return sum(_nbytes(o) for o in obj)
    return 0


def _equal_inputs(before: list[Any], after: list[Any]) -> bool:
    if len(before) != len(after):
        return False
    for b, a in zip(before, after, strict=True):
        if isinstance(b, torch.Tensor) and (
            not isinstance(a, torch.Tensor) or not torch.equal(b.to(a.device), a)
        ):
            return False
    return True


class Judge:
    def __init__(self, device: str, launcher: RunnerLauncher, baselines: BaselineCache) -> None:
        self.device = torch.device(device)
        self.launcher = launcher
        self.baselines = baselines
        self._quality: dict[str, list[str]] = {}

    def evaluate(self, task: LoadedTask, artifact: Path, options: EvalOptions) -> Verdict:
        meta = task.spec.meta
        self._set_precision(meta.tf32)
        n_trials = options.trials or meta.trials
        seeds = [secrets.randbits(62) for _ in range(n_trials + options.timing_pool + 2)]
        verdict = Verdict(Status.OK, seeds=seeds)
        reference = task.make_model(seeds[0], self.device)
        verdict.task_warnings = self._task_quality(task, reference)
        relative = meta.relative_check or bool(verdict.task_warnings)
        verdict.correctness = Correctness(atol=meta.atol, rtol=meta.rtol, relative_check=relative)
        handle = self.launcher.start(artifact)
        try:
            self._load(handle, task, reference, meta.tf32)
            trial_seeds = seeds[1 : n_trials + 1]
            for t, seed in enumerate(trial_seeds):
                first = t == 0
                self._trial(handle, task, reference, t, seed, first, verdict, repeat=(t == 1))
            pool = [
                task.make_inputs(s, self.device)
                for s in seeds[n_trials + 1 : n_trials + 1 + options.timing_pool]
            ]
            relative = verdict.correctness.relative_check
            verdict.timings.candidate = self._time_candidate(handle, task, reference, pool, options, relative)
            self._trial(handle, task, reference, n_trials, seeds[-1], candidate_first=True, verdict=verdict)
        except _Stop as stop:
            verdict.status, verdict.message, verdict.failure = stop.status, stop.message, stop.failure
            if stop.rule:
                verdict.findings.append(Finding(rule=stop.rule, message=stop.message))
            return verdict
        finally:
            handle.close()
        self._baselines(task, reference, pool, options, verdict.timings)
        verdict.review = self._implausible(verdict.timings, pool[0], reference, options)
        return verdict

    def _implausible(
        self, timings: Timings, inputs: list[Any], reference: torch.nn.Module, options: EvalOptions
    ) -> list[Finding]:
        """Claims the hardware cannot back: faster than moving the task's minimum bytes at the device's
        peak bandwidth, or more than `options.max_speedup` over eager."""
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
        peak = peak_bandwidth(device_name(self.device)) if self.device.type == "cuda" else None
        if peak is not None:
            min_bytes = _nbytes(inputs) + _nbytes(self._reference(reference, inputs))
            floor_ms = min_bytes / peak * 1e3
            if cand.median_ms < floor_ms:
                out.append(
                    Finding(
                        rule="faster_than_memory_roofline",
                        message=f"median {cand.median_ms * 1e3:.1f} µs is under the {floor_ms * 1e3:.1f} µs "
                        f"needed to read the inputs and write the outputs ({min_bytes / 1e6:.1f} MB) at "
                        f"{peak / 1e12:.2f} TB/s: flagged for review, not rewarded as a speedup",
                    )
                )
        return out

    def _task_quality(self, task: LoadedTask, reference: torch.nn.Module) -> list[str]:
        """Checked once per task and process, on two fixed input sets."""
        if task.spec.id not in self._quality:
            outs = [self._reference(reference, task.make_inputs(s, self.device)) for s in (11, 12)]
            meta = task.spec.meta
            self._quality[task.spec.id] = quality_warnings(outs[0], outs[1], meta.atol, meta.rtol)
        return self._quality[task.spec.id]

    def _set_precision(self, tf32: bool) -> None:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32

    def _ask(self, handle: RunnerHandle, msg: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        try:
            reply = handle.request(msg, timeout_s)
        except RunnerTimeout as e:
            raise _Stop(Status.TIMEOUT, f"the candidate did not finish '{msg['op']}': {e}") from None
        except RunnerDied as e:
            raise _Stop(Status.RUNTIME_ERROR, str(e), failure=FailureKind.RUNNER_DIED) from None
        except BadMessage as e:
            raise _Stop(Status.FORBIDDEN, str(e), rule="forged_message") from None
        if not reply["ok"]:
            kind = reply.get("kind")
            status = Status.FORBIDDEN if kind == "forbidden" else Status.RUNTIME_ERROR
            error = str(reply.get("error", "unknown error"))[:4000]
            rule = str(reply.get("rule", "runtime_check"))
            if not re.fullmatch(r"[a-z_]{1,40}", rule):  # a label from the candidate's process: keep it tame
                rule = "runtime_check"
            raise _Stop(status, error, rule=rule if status is Status.FORBIDDEN else None)
        return reply

    def _load(self, handle: RunnerHandle, task: LoadedTask, reference: torch.nn.Module, tf32: bool) -> None:
        state = {k: v.detach().cpu() for k, v in reference.state_dict().items()}
        msg = {
            "op": "load",
            "init_inputs": list(task.get_init_inputs()),
            "state_dict": state,
            "tf32": tf32,
        }
        self._ask(handle, msg, self.launcher.limits.load_timeout_s)

    def _trial(
        self,
        handle: RunnerHandle,
        task: LoadedTask,
        reference: torch.nn.Module,
        t: int,
        seed: int,
        candidate_first: bool,
        verdict: Verdict,
        repeat: bool = False,
    ) -> None:
        """One trial; with `repeat` the candidate also gets the same inputs a second time, so call counting
        and work deferred to the next call show."""
        inputs = task.make_inputs(seed, self.device)
        poison = min(MAX_POISON_BYTES, 2 * _nbytes(inputs))
        msg = {"op": "run", "inputs": inputs, "poison_bytes": poison}
        timeout = self.launcher.limits.call_timeout_s
        if candidate_first:
            reply = self._ask(handle, msg, timeout)
            ref_out = self._reference(reference, inputs)
        else:
            ref_out = self._reference(reference, inputs)
            reply = self._ask(handle, msg, timeout)
        if not _equal_inputs(inputs, reply.get("inputs_after", [])):
            raise _Stop(Status.FORBIDDEN, "the candidate modified its input tensors", rule="inputs_modified")
        self._check(reply["output"], ref_out, task, t, candidate_first, verdict)
        if repeat:
            again = self._ask(handle, msg, timeout)
            self._check(again["output"], ref_out, task, t, False, verdict, " (same inputs, second call)")

    def _check(
        self,
        output: Any,
        ref_out: Any,
        task: LoadedTask,
        t: int,
        candidate_first: bool,
        verdict: Verdict,
        context: str = "",
    ) -> None:
        meta = task.spec.meta
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

    def _reference(self, reference: torch.nn.Module, inputs: list[Any]) -> Any:
        with torch.no_grad():
            out = reference(*inputs)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        return out

    def _policy(self, options: EvalOptions) -> TimingPolicy:
        return TimingPolicy(budget_s=options.timing_budget_s, target_rel_ci=options.target_rel_ci)

    def _time_candidate(
        self,
        handle: RunnerHandle,
        task: LoadedTask,
        reference: torch.nn.Module,
        pool: list[list[Any]],
        options: EvalOptions,
        relative: bool,
    ) -> TimingStats:
        policy = self._policy(options)
        msg = {"op": "time", "pool": pool, "policy": policy.__dict__}
        reply = self._ask(handle, msg, options.timing_budget_s * 3 + self.launcher.limits.call_timeout_s)
        idx = int(reply["last_index"])
        if not 0 <= idx < len(pool):
            raise _Stop(
                Status.FORBIDDEN, "the runner reported an input set that does not exist", "forged_message"
            )
        ref_out = self._reference(reference, pool[idx])
        meta = task.spec.meta
        corr = Verdict(
            Status.OK, correctness=Correctness(atol=meta.atol, rtol=meta.rtol, relative_check=relative)
        )
        try:
            self._check(reply["last_output"], ref_out, task, -1, False, corr, " (last timed call)")
        except _Stop as stop:
            raise _Stop(
                Status.INCORRECT,
                stop.message + " — the output of a timed call was wrong (caching or deferred work)",
                rule="timed_output_wrong",
            ) from None
        return TimingStats.model_validate(reply["stats"])

    def _baselines(
        self,
        task: LoadedTask,
        reference: torch.nn.Module,
        pool: list[list[Any]],
        options: EvalOptions,
        timings: Timings,
    ) -> None:
        meta = task.spec.meta
        key = content_hash(
            task.spec.id,
            device_name(self.device),
            torch.__version__,
            meta.precision.value,
            meta.tf32,
            options.timing_budget_s,
            options.target_rel_ci,
        )
        policy = self._policy(options)
        cached = self.baselines.get("eager:" + key)
        timings.baseline_cached = cached is not None
        if cached is None:
            cached = measure(lambda *a: self._reference(reference, list(a)), pool, self.device, policy).stats
            self.baselines.put("eager:" + key, cached)
        timings.eager = cached
        if not options.compile_baseline:
            return
        timings.compile_mode = meta.compile_mode
        ckey = f"compile:{meta.compile_mode}:{key}"
        compiled_stats = self.baselines.get(ckey)
        if compiled_stats is None:
            compiled_stats = self._time_compiled(reference, pool, meta.compile_mode, policy)
            if compiled_stats is not None:
                self.baselines.put(ckey, compiled_stats)
        else:
            timings.baseline_cached = timings.baseline_cached and True
        timings.compiled = compiled_stats

    def _time_compiled(
        self, reference: torch.nn.Module, pool: list[list[Any]], mode: str, policy: TimingPolicy
    ) -> TimingStats | None:
        try:
            compiled = torch.compile(reference, mode=None if mode == "default" else mode)
            with torch.no_grad():
                compiled(*pool[0])

            def call(*a: Any) -> Any:
                with torch.no_grad():
                    return compiled(*a)

            return measure(call, pool, self.device, policy).stats
        except Exception:  # a baseline that cannot compile gives no milestone 3, not a failed evaluation
            return None
