"""Vet one task on the device it will be judged on: does it run (eager, torch.compile), do its outputs
depend on its inputs, are they large enough to judge, the same on a repeated run, is its eager runtime in
the window, does it fit in memory. Its baselines go to the engine's baseline cache on the way.

Runs in the task's own process (reference_host.py: a task is a tenant's code); the judge stores the
baselines it measured under the keys the judge computes.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch

from evalsvc.core.pools import VetFinding, VetPolicy, VetReason, VetRecord, status_of
from evalsvc.core.tasks import InvalidTask, TaskSpec
from evalsvc.engine.baseline_timing import call_reference, set_precision, time_compiled
from evalsvc.engine.baselines import BaselineCache, baseline_keys
from evalsvc.engine.compare import compare
from evalsvc.engine.device_info import device_name
from evalsvc.engine.taskload import LoadedTask, constant_outputs, load_task, zeros_pass
from evalsvc.engine.timing import TimingPolicy, measure, rotating

INPUT_SEEDS = (101, 202)
FORWARD_SEEDS = (7, 8)  # the global RNG is reseeded differently before the two runs on the same inputs
# Runtimes this far over the window are judged without a full measurement: a first (cold) call, or the
# faster of two warm calls. A first call also pays one-time set-up (cuDNN, cuBLAS, lazy module loading),
# so it alone decides only past COLD_CALL_MS.
FAR_OUTSIDE = 10.0
COLD_CALL_MS = 10_000.0
CLEARLY_OUTSIDE = 2.0


class _Reject(Exception):
    def __init__(self, reason: VetReason, message: str) -> None:
        super().__init__(message)
        self.finding = VetFinding(reason=reason, message=message[:1000])


def _nbytes(obj: Any) -> int:
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, list | tuple):
        return sum(_nbytes(o) for o in obj)
    return 0


def _finite(obj: Any) -> bool:
    if isinstance(obj, torch.Tensor):
        return not obj.is_floating_point() or bool(torch.isfinite(obj).all())
    if isinstance(obj, list | tuple):
        return all(_finite(o) for o in obj)
    return True


class Vetter:
    """Vets tasks on one device; baselines land in `baselines` under the judge's own keys."""

    def __init__(self, device: str, device_class: str, baselines: BaselineCache) -> None:
        self.device = torch.device(device)
        self.device_class = device_class
        self.baselines = baselines

    def vet(self, spec: TaskSpec, policy: VetPolicy) -> VetRecord:
        started = time.monotonic()
        record = VetRecord(
            task_id=spec.id,
            device_class=self.device_class,
            device_name=device_name(self.device),
            torch_version=torch.__version__,
            status=status_of([]),
            vetted_at=time.time(),
        )
        try:
            self._vet(spec, policy, record)
        except _Reject as r:
            record.findings.append(r.finding)
        except torch.OutOfMemoryError as e:  # anywhere else (comparing outputs in float64, torch.compile)
            record.findings.append(
                _Reject(VetReason.OUT_OF_MEMORY, f"out of memory while vetting: {e}").finding
            )
        finally:
            self._release()
        record.status = status_of(record.findings)
        record.duration_s = time.monotonic() - started
        return record

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _release(self) -> None:
        torch._dynamo.reset()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def _run(self, model: torch.nn.Module, inputs: list[Any], seed: int) -> tuple[Any, float]:
        """One eager forward (global RNG reseeded first) and its wall time in ms; errors become reasons."""
        torch.manual_seed(seed)
        try:
            self._sync()
            t0 = time.perf_counter()
            with torch.no_grad():
                out = model(*inputs)
            self._sync()
        except torch.OutOfMemoryError as e:
            raise _Reject(VetReason.OUT_OF_MEMORY, f"out of memory in eager forward: {e}") from None
        except Exception as e:
            raise _Reject(VetReason.EAGER_ERROR, f"eager forward raised {type(e).__name__}: {e}") from None
        return out, (time.perf_counter() - t0) * 1e3

    def _vet(self, spec: TaskSpec, policy: VetPolicy, record: VetRecord) -> None:
        try:
            task = load_task(spec)
        except InvalidTask as e:
            raise _Reject(VetReason.INVALID_TASK, str(e)) from None
        set_precision(spec.meta.tf32)  # as the judge times its baselines
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        try:
            model = task.make_model(0, self.device)
            inputs = [task.make_inputs(s, self.device) for s in INPUT_SEEDS]
        except torch.OutOfMemoryError as e:
            raise _Reject(
                VetReason.OUT_OF_MEMORY, f"out of memory building the model or inputs: {e}"
            ) from None
        except Exception as e:
            raise _Reject(
                VetReason.EAGER_ERROR, f"building the model raised {type(e).__name__}: {e}"
            ) from None
        first, first_ms = self._run(model, inputs[0], FORWARD_SEEDS[0])
        if first_ms > max(policy.max_eager_ms * FAR_OUTSIDE, COLD_CALL_MS):
            raise _Reject(
                VetReason.TOO_SLOW,
                f"one eager call took {first_ms:.1f} ms, far over the {policy.max_eager_ms:g} ms window",
            )
        again, again_ms = self._run(model, inputs[0], FORWARD_SEEDS[1])
        other, other_ms = self._run(model, inputs[1], FORWARD_SEEDS[0])
        self._check_outputs(task, first, again, other, record)
        if min(again_ms, other_ms) > policy.max_eager_ms * CLEARLY_OUTSIDE:
            raise _Reject(
                VetReason.TOO_SLOW,
                f"warm eager calls took {min(again_ms, other_ms):.1f} ms, over twice the "
                f"{policy.max_eager_ms:g} ms window",
            )
        self._check_memory(policy, inputs[0], first, model, record)
        pool = inputs  # the timing pool: distinct values every call (GPU-sized inputs are slow to make)
        self._time_eager(spec, policy, model, pool, record)
        if policy.check_compile:
            self._check_compile(spec, policy, model, pool, inputs[0], first, record)

    def _check_outputs(self, task: LoadedTask, first: Any, again: Any, other: Any, record: VetRecord) -> None:
        meta = task.spec.meta
        if not _finite(first):
            raise _Reject(VetReason.NON_FINITE, "the reference's outputs contain NaN or Inf")
        repeat = compare(again, first, meta.atol, meta.rtol)
        if not repeat.passed:
            raise _Reject(
                VetReason.NONDETERMINISTIC,
                "the same inputs gave different outputs on a second run (hidden randomness): "
                f"{repeat.message}",
            )
        if constant_outputs(first, other):
            raise _Reject(VetReason.CONSTANT_OUTPUT, "the outputs do not change with the inputs")
        if zeros_pass(first, meta.atol, meta.rtol) or zeros_pass(other, meta.atol, meta.rtol):
            record.relative_check = True
            record.findings.append(
                VetFinding(
                    reason=VetReason.TINY_OUTPUT,
                    message=f"all-zero outputs pass the tolerance (atol={meta.atol:g}, rtol={meta.rtol:g}): "
                    "evaluations compare by norm-relative error",
                )
            )

    def _check_memory(
        self, policy: VetPolicy, inputs: list[Any], output: Any, model: torch.nn.Module, record: VetRecord
    ) -> None:
        if self.device.type == "cuda":
            peak = torch.cuda.max_memory_allocated(self.device)
            total = torch.cuda.get_device_properties(self.device).total_memory
        else:  # what the judge holds at once: weights, inputs, outputs (the runner holds a copy)
            peak = _nbytes(list(model.parameters())) + _nbytes(list(model.buffers()))
            peak += _nbytes(inputs) + _nbytes(output)
            total = _host_memory()
        record.peak_memory_bytes = peak
        limit = policy.memory_fraction * total
        if peak > limit:
            raise _Reject(
                VetReason.OUT_OF_MEMORY,
                f"peak {peak / 2**30:.2f} GiB is over {policy.memory_fraction:.0%} of the device's "
                f"{total / 2**30:.0f} GiB (the judge and the candidate share it)",
            )

    def _keys(self, spec: TaskSpec, policy: VetPolicy):
        return baseline_keys(
            spec, device_name(self.device), torch.__version__, policy.timing_budget_s, policy.target_rel_ci
        )

    def _policy(self, policy: VetPolicy) -> TimingPolicy:
        return TimingPolicy(budget_s=policy.timing_budget_s, target_rel_ci=policy.target_rel_ci)

    def _time_eager(
        self,
        spec: TaskSpec,
        policy: VetPolicy,
        model: torch.nn.Module,
        pool: list[list[Any]],
        record: VetRecord,
    ) -> None:
        def call(*a: Any) -> Any:
            return call_reference(model, list(a))

        key = self._keys(spec, policy).eager
        stats = self.baselines.get(key)
        if stats is None:
            stats = measure(call, rotating(pool), self.device, self._policy(policy)).stats
            self.baselines.put(key, stats)
        record.eager_ms = stats.median_ms
        if stats.median_ms < policy.min_eager_ms:
            raise _Reject(
                VetReason.TOO_FAST,
                f"eager median {stats.median_ms:.4f} ms is under the window's {policy.min_eager_ms:g} ms "
                "(launch overhead, not the kernel, would be measured)",
            )
        if stats.median_ms > policy.max_eager_ms:
            raise _Reject(
                VetReason.TOO_SLOW,
                f"eager median {stats.median_ms:.1f} ms is over the window's {policy.max_eager_ms:g} ms",
            )

    def _check_compile(
        self,
        spec: TaskSpec,
        policy: VetPolicy,
        model: torch.nn.Module,
        pool: list[list[Any]],
        inputs: list[Any],
        eager_out: Any,
        record: VetRecord,
    ) -> None:
        mode = spec.meta.compile_mode
        record.compile_checked = True
        try:
            compiled = torch.compile(model, mode=None if mode == "default" else mode)
            torch.manual_seed(FORWARD_SEEDS[0])
            with torch.no_grad():
                out = compiled(*inputs)
            self._sync()
        except Exception as e:
            raise _Reject(
                VetReason.COMPILE_ERROR, f"torch.compile (mode {mode}) failed: {type(e).__name__}: {e}"
            ) from None
        meta = spec.meta
        agree = compare(out, eager_out, meta.atol, meta.rtol, relative=record.relative_check)
        if not agree.passed:
            record.findings.append(
                VetFinding(
                    reason=VetReason.COMPILE_MISMATCH,
                    message=f"torch.compile's outputs differ from eager's: {agree.message}",
                )
            )
        key = self._keys(spec, policy).compiled
        stats = self.baselines.get(key)
        if stats is None:
            stats = time_compiled(model, pool, mode, self.device, self._policy(policy))
            if stats is None:
                raise _Reject(VetReason.COMPILE_ERROR, "torch.compile failed while timing")
            self.baselines.put(key, stats)
        record.compiled_ms = stats.median_ms


def _host_memory() -> int:
    pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    return int(pages * size) if pages > 0 and size > 0 else 2**40
