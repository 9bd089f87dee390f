"""Review of a correct candidate's speed: its roofline (the task's minimum bytes and FLOPs against this
device's measured peaks) and the claims the hardware cannot back, flagged for review, not rewarded."""

from __future__ import annotations

import logging
import threading
from typing import Any

import torch

from evalsvc.core.options import EvalOptions
from evalsvc.core.profiles import Roofline, TaskWork
from evalsvc.core.results import Finding, Timings
from evalsvc.engine.hardware import task_roofline
from evalsvc.engine.reference import Reference

log = logging.getLogger("evalsvc.judge")

# A kernel may beat a copy's bandwidth a little (reads alone, writes still in L2 when the timer stops);
# past this factor over the measured peak it is not believed.
ROOFLINE_SLACK = 1.25


class Rooflines:
    """Thread-safe: the task's work counted once per task and process, set against this device's peaks."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._lock = threading.Lock()
        self._work: dict[str, TaskWork] = {}

    def of(self, ref: Reference, inputs: list[Any], timings: Timings) -> Roofline | None:
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


def implausible(
    device: torch.device, timings: Timings, roof: Roofline | None, options: EvalOptions
) -> list[Finding]:
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
    if device.type == "cuda" and roof is not None:
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
