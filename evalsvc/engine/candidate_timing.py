"""The candidate's timing as the judge runs it: the runner's calibration on the null candidate, the
candidate's rounds (judged_timing.py), where the runner's CPU time went meanwhile (CPU device), the refusal
of figures the judge's clock does not back, and the display-only CUDA-graph timing of a small kernel. A
refusal raises `Stop`."""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import torch

from evalsvc.core.results import FailureKind, Status, Timings, TimingStats
from evalsvc.core.stats import summarize
from evalsvc.engine.cpu_attribution import Attribution, CpuSampler, FileId, SamplerError, file_identity
from evalsvc.engine.judged_timing import (
    LibraryExcess,
    Overhead,
    RoundRunner,
    TimingRefused,
    calibrate,
    confirmed_interval,
    judge_figure,
    library_excess,
    process_cpu_ms,
    refuse_disagreement,
    refuse_library_beside_eager,
    refuse_library_compute,
    time_candidate,
)
from evalsvc.engine.launcher import RunnerHandle
from evalsvc.engine.messages import TimeGraphRequest
from evalsvc.engine.profiling import nbytes
from evalsvc.engine.runner_session import RunnerSession, Stop, seeded_message
from evalsvc.engine.timing import TimingPolicy, method_name
from evalsvc.engine.written_code import ExecPages, exec_pages, written_since

log = logging.getLogger("evalsvc.judge")


def cpu_clock(handle: RunnerHandle, device: torch.device) -> Callable[[], float | None] | None:
    """The runner's CPU time, read from outside it: on the CPU device only (a GPU's time is not it)."""
    pid = handle.proc.pid
    return partial(process_cpu_ms, pid) if device.type == "cpu" and pid is not None else None


def own_libraries(handle: RunnerHandle) -> set[FileId]:
    """The candidate's own shared libraries (its CPU time there is its own, not a library's)."""
    return {i for p in (handle.scratch / "artifact").rglob("*.so") if (i := file_identity(str(p)))}


def calibrate_runner(
    rounds: RoundRunner, policy: TimingPolicy, rng: random.Random, settle: Callable[[], None]
) -> Overhead:
    """The runner's own cost per call, on the null candidate; a failure here is ours (no candidate code
    has run in the runner yet). `settle`: wait for starting runners (launcher.settle)."""
    # No runner starting beside the host-bound null rounds on a GPU either (docs/performance.md).
    settle()
    try:
        return calibrate(rounds, policy, rng)
    except (TimingRefused, Stop) as e:
        raise Stop(
            Status.INTERNAL_ERROR, f"calibrating the runner failed: {e}", failure=FailureKind.WORKER_ERROR
        ) from None


def code_pages(handle: RunnerHandle, device: torch.device) -> ExecPages | None:
    """The runner's executable pages and how much of each it wrote: on the CPU device, where the library
    check counts code by the file it came from (on a GPU the kernels are the device's, not host code)."""
    pid = handle.proc.pid
    return exec_pages(pid) if device.type == "cpu" and pid is not None else None


def refuse_written_code(before: ExecPages | None, handle: RunnerHandle, device: torch.device) -> None:
    """Machine code written in the runner since the candidate was imported is nobody's build (a library's
    kernel copied over the solution's own text, code made in anonymous memory)."""
    after = code_pages(handle, device)
    if before is None or after is None:
        return
    if found := written_since(before, after):
        raise Stop(
            Status.FORBIDDEN,
            f"machine code was written at run time in the runner: {', '.join(found[:4])}; the code that "
            "runs must be the solution's own, as the compile stage built it",
            rule="code_written_at_runtime",
        )


@contextmanager
def attributed(handle: RunnerHandle, device: torch.device) -> Iterator[list[Attribution]]:
    """On the CPU device, where the runner's CPU time goes meanwhile, as the kernel samples it
    (cpu_attribution.py); nothing where it cannot be sampled (a GPU, no perf events)."""
    found: list[Attribution] = []
    if device.type != "cpu" or handle.proc.pid is None:
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


def time_candidate_rounds(
    rounds: RoundRunner,
    policy: TimingPolicy,
    rng: random.Random,
    overhead: Overhead,
    timings: Timings,
    device: torch.device,
) -> None:
    """The candidate's rounds, driven, clocked and spot-checked by the judge (judged_timing.py)."""
    try:
        timed = time_candidate(rounds, policy, rng, overhead)
        timings.candidate = summarize(timed.samples_ms, method_name(device))
        timings.candidate_judged = timed.judged
    except TimingRefused as e:
        raise Stop(Status(e.status), str(e), rule=e.rule) from None


def where_time_went(
    null: list[Attribution],
    candidate: list[Attribution],
    calls: dict[str, int],
    own: set[FileId],
    timings: Timings,
) -> LibraryExcess | None:
    """A candidate whose CPU time per call ran mostly in libraries (MKL inside libtorch_cpu, found by
    walking memory with no import to screen) or generated code is refused (`library_compute`); what it
    spent there is returned, to be held against eager PyTorch's time once that is measured."""
    if not null or not candidate or timings.candidate_judged is None:
        return None
    excess = library_excess(null[0], calls.get("null", 0), candidate[0], calls.get("candidate", 0), own)
    timings.candidate_judged.library_share = excess.share
    timings.candidate_judged.sampled = candidate[0].samples
    try:
        refuse_library_compute(excess, candidate[0])
    except TimingRefused as e:
        raise Stop(Status(e.status), str(e), rule=e.rule) from None
    return excess


def library_beside_eager(excess: LibraryExcess | None, timings: Timings) -> Stop | None:
    """After eager PyTorch is timed: a candidate's library time per call against eager's whole call."""
    if excess is None or timings.eager is None:
        return None
    try:
        refuse_library_beside_eager(excess, timings.eager.median_ms)
    except TimingRefused as e:
        return Stop(Status(e.status), str(e), rule=e.rule)
    return None


def refuse_disagreeing(timings: Timings, device: torch.device) -> None:
    """A median the judge's own clock does not back is refused; on the CPU device the interval is the one
    the judge confirms."""
    assert timings.candidate is not None and timings.candidate_judged is not None
    try:
        refuse_disagreement(timings.candidate.median_ms, timings.candidate_judged, device.type)
    except TimingRefused as e:
        raise Stop(Status(e.status), str(e), rule=e.rule) from None
    if device.type == "cpu":
        timings.candidate = confirmed_interval(timings.candidate, timings.candidate_judged)
        timings.candidate_judged.confirmed_high_ms = judge_figure(timings.candidate_judged, "cpu").high_ms


def time_graph(session: RunnerSession, inputs: list[Any], seed: int, timings: Timings) -> None:
    """A launch-overhead-free timing of a small kernel from CUDA-graph replays, for display. Runs after the
    verdict is settled; a candidate that cannot be captured in a graph simply gets none."""
    explicit: TimeGraphRequest = {"op": "time_graph", "inputs": inputs}
    try:
        reply = session.ask_made(explicit, partial(seeded_message, explicit, seed), nbytes(inputs))
        timings.candidate_graph = TimingStats.model_validate(reply["stats"])
    except (Stop, ValueError):
        pass  # eager's is still shown
