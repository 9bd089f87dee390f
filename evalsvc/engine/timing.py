"""One timing method for candidate and baselines alike: rounds of calls, each call on fresh inputs (an L2
flush before it on a GPU), each round ended by a device-wide synchronisation, repeated until the median is
known to a target precision, then a random number of rounds more.

The candidate's rounds run in its runner process, one request per round, with the judge's clock around
each (`evalsvc.engine.judged_timing`); baselines run the same rounds in the task's process. What a round
does is `RoundTimer.run`, how long rounds are and when to stop is `RoundPlan`, for both.
"""

from __future__ import annotations

import contextlib
import random
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from evalsvc.core.results import TimingStats
from evalsvc.core.stats import precise_enough, summarize
from evalsvc.engine.commitment import output_tensors


@dataclass(frozen=True)
class TimingPolicy:
    warmup_runs: int = 3
    min_runs: int = 10
    max_runs: int = 2000
    target_rel_ci: float = 0.01
    budget_s: float = 5.0
    flush_bytes: int = 256 * 1024 * 1024  # an L2 flush before each call, on a GPU only
    # Queued calls keep the GPU busy back to back, as a kernel runs in a real model (docs/performance.md).
    calls_per_sync: int = 10
    # Each round is calls_per_sync plus 0..extra_calls calls, and 0..extra_rounds rounds follow the stop
    # rule, drawn at random: a candidate cannot tell from its own measurements which call is the last.
    extra_calls: int = 4
    extra_rounds: int = 2
    # In-process timing (baselines, vetting) warms up until two warm-up rounds' medians agree this closely,
    # for at most `settle_share` of the budget: lazy initialisation (cuBLAS handles and workspaces,
    # Inductor's first calls, clocks ramping up) then lands in no timed sample.
    settle_rel: float = 0.05
    settle_share: float = 0.3


@dataclass
class Round:
    samples_ms: list[float]  # one per call, in call order
    outputs: list[Any]  # every call's output, kept for the judge to check any of them
    late_writes: bool = False  # GPU: a probe call's output changed after forward returned (PROBE_SHARE)
    probes: list[Probe] = field(default_factory=list)  # GPU: what each probe found left running


@dataclass
class Measurement:
    stats: TimingStats
    last_output: Any
    wall_s: float
    samples_ms: list[float]  # in the order taken


def method_name(device: torch.device) -> str:
    if device.type == "cuda":
        return "cuda-events+l2-flush+fresh-inputs+rounds"
    return "wall-clock+fresh-inputs+rounds"


class RoundTimer:
    """Runs rounds of calls, each call on an input set of its own (made or received just before it, never
    used before), after an L2 flush on a GPU; one device-wide synchronisation ends the round. Inputs that
    no call has seen before leave nothing to cache: a cache keyed by pointer or by value returns another
    call's output, which checking any output shows."""

    def __init__(self, device: torch.device, flush_bytes: int) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.flush = torch.empty(flush_bytes // 4, dtype=torch.float32, device=device) if self.cuda else None
        self._ended = 0.0

    def run(
        self,
        fn: Callable[..., Any],
        sets: Iterable[Sequence[Any]],
        around: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    ) -> Round:
        """Call `fn` once per input set that `sets` yields (lazily: a set is made right before its call),
        each call inside `around()`. On a GPU the calls are queued and timed by events; on the CPU each call
        is timed by the wall clock."""
        marks: list[tuple[Any, Any]] = []
        outputs = []
        late = False
        probes: list[Probe] = []
        tick = torch.zeros(1, device=self.device) if self.cuda else None
        ticked = torch.cuda.Event(enable_timing=True) if self.cuda else None  # made ahead: no allocation to
        # run a collection (and a finalizer of the candidate's) between a call and its probe
        for k, inputs in enumerate(sets):
            if self.flush is not None:
                # No synchronize between the flush and `begin`: the GPU is still flushing (~60 µs for
                # 256 MB on an H200) while the CPU records `begin` and launches the call, so the first
                # kernel starts right after `begin` instead of after the host's launch latency (tens of
                # µs). As triton's do_bench times; host work between the call's kernels is still counted.
                self.flush.fill_(float(k))
            outputs.append(self._timed_call(fn, inputs, around, marks))
            # Drawn after the call returned, so nothing the call saw tells a probe from any other call.
            if tick is not None and ticked is not None and _PROBES.random() < PROBE_SHARE:
                tick.fill_(float(k))  # one block: it waits only if the call left the GPU's SMs held
                ticked.record()
                # Read once the tick is queued: a GPU gone idle could not start it before its launch
                # returned (null candidates' gaps read 25-48 µs on an H100 when read before the launch).
                queued_us = (time.perf_counter() - self._ended) * 1e6
                changed, tail_us = late_work(outputs[-1])
                late = late or changed
                begin, end = marks[-1]
                # A GPU that ran dry before the tick was queued waited on the host, not on held SMs.
                host_us = min(queued_us, MAX_HOST_DELAY_US)
                gap_us = max(0.0, end.elapsed_time(ticked) * 1e3 - host_us)
                probes.append(Probe(tail_us, gap_us, begin.elapsed_time(end) * 1e3))
        if not self.cuda:
            return Round([(end - begin) * 1e3 for begin, end in marks], outputs)
        torch.cuda.synchronize()
        return Round([begin.elapsed_time(end) for begin, end in marks], outputs, late, probes)

    def _timed_call(
        self,
        fn: Callable[..., Any],
        inputs: Sequence[Any],
        around: Callable[[], contextlib.AbstractContextManager[Any]],
        marks: list[tuple[Any, Any]],
    ) -> Any:
        begin: torch.cuda.Event | float
        end: torch.cuda.Event | float
        with around():
            if self.cuda:
                begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                begin.record()
                out = fn(*inputs)
                end.record()
                self._ended = time.perf_counter()  # the host's clock when `end` was queued
            else:
                begin = time.perf_counter()
                out = fn(*inputs)
                end = time.perf_counter()
        marks.append((begin, end))
        return out


# GPU: the share of timed calls probed, drawn from the OS's randomness once the call has returned (a call
# cannot tell whether it will be): work it left running on another stream, which the events on the current
# stream did not time, is looked for twice (`late_work`). A copy of the whole output would not do: it
# trails the writer (docs/performance.md, docs/security.md).
PROBE_SHARE = 0.2
PROBED_ELEMENTS = 4096  # per output tensor
# A probe whose device-wide sync waited longer than an idle one by this much, or by this share of the call's
# own time, found work still running (honest kernels' probes waited 5-37 µs on the H200,
# docs/performance.md); so did one whose one-block kernel, queued right after the call, started this much
# after the call's end (the call's work still held the SMs). The median moves only if most calls leave
# such work, so most probes, and at least three, must find it (`tails_left`).
LATE_TAIL_US = 60.0
LATE_GAP_US = 20.0
LATE_TAIL_SHARE = 0.05
# At most this much of the host's delay between a call's `end` and its probe's one-block kernel is taken
# off that kernel's gap: a longer delay is the host stalled (a collection, a finalizer), not its launch path.
MAX_HOST_DELAY_US = 200.0
_PROBES = random.SystemRandom()


def late_work(out: Any) -> tuple[bool, float]:
    """Right after a call: (whether elements of its output read at random places changed across a
    device-wide sync, how many µs that sync waited beyond an idle one). Both see work on other streams
    that outlived the call; the wait sees it whatever it writes (reads queued on the current stream can
    trail a writer whose blocks hold the GPU, docs/security.md)."""
    reads = _Reads(out)
    read = torch.cuda.Event()
    read.record()
    read.synchronize()  # the current stream is done: the call's own work and the reads
    start = time.perf_counter()
    torch.cuda.synchronize()  # every stream
    waited = time.perf_counter()
    torch.cuda.synchronize()  # an idle device: what a sync costs by itself
    idle = time.perf_counter()
    return reads.changed(), max(0.0, (waited - start) - (idle - waited)) * 1e6


@dataclass(frozen=True)
class Probe:
    tail_us: float  # how much longer than an idle one the device-wide sync after the call waited
    gap_us: float  # from the call's `end` to a one-block kernel queued after it, less the host's delay
    call_us: float  # the call's own time by the events

    @property
    def late(self) -> bool:
        share = LATE_TAIL_SHARE * self.call_us
        return self.tail_us > max(LATE_TAIL_US, share) or self.gap_us > max(LATE_GAP_US, share)


def tails_left(probes: Sequence[Probe]) -> int:
    """How many probes found work left running, where that is most of them and at least three (a host
    hiccup in a sync is not a finding); 0 otherwise."""
    found = sum(p.late for p in probes)
    return found if found >= 3 and 2 * found >= len(probes) else 0


def written_late(out: Any) -> bool:
    """True when elements of `out`'s tensors, read at random places now (ordered after the current
    stream's work), differ bit for bit after a device-wide sync: another stream was still writing them."""
    reads = _Reads(out)
    if any(t.is_cuda for t in reads.tensors):
        torch.cuda.synchronize()
    return reads.changed()


class _Reads:
    """Elements of an output's tensors at random places, read now on the current stream."""

    def __init__(self, out: Any) -> None:
        self.tensors = [t.detach() for t in output_tensors(out) if t.numel() > 0]
        self.places = [_random_places(t) for t in self.tensors]
        self.before = self._take()

    def _take(self) -> list[torch.Tensor]:
        return [_bits(torch.take(t, i)) for t, i in zip(self.tensors, self.places, strict=True)]

    def changed(self) -> bool:
        """Read again: does any element differ bit for bit?"""
        return any(not torch.equal(a, b) for a, b in zip(self.before, self._take(), strict=True))


def _random_places(t: torch.Tensor) -> torch.Tensor:
    n = t.numel()
    if n <= PROBED_ELEMENTS:
        return torch.arange(n, device=t.device)
    generator = torch.Generator(device=t.device)
    generator.manual_seed(_PROBES.getrandbits(63))
    return torch.randint(0, n, (PROBED_ELEMENTS,), device=t.device, generator=generator)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The values as raw bytes: NaN equals NaN, -0.0 differs from 0.0."""
    return t.contiguous().view(torch.uint8)


@dataclass
class RoundPlan:
    """How many calls each round has and when to stop: a warm-up round, then rounds of `calls_per_sync`
    plus a random extra until the median of the recorded samples is precise enough, `max_runs` samples
    are in or the budget is spent, then a random number of rounds more. The judge keeps the plan and its
    random draws; the runner only ever sees one round."""

    policy: TimingPolicy
    rng: random.Random
    min_rounds: int = 1  # recorded before the stop rule may fire
    samples_ms: list[float] = field(default_factory=list)
    _recorded: int = 0
    _tail: int | None = None  # rounds left after the stop rule fired
    _deadline: float = 0.0

    def warmup(self) -> int:
        self._deadline = time.monotonic() + self.policy.budget_s
        return max(1, self.policy.warmup_runs)

    def rounds(self) -> Iterator[int]:
        """The timed rounds' sizes; record each round's samples before asking for the next."""
        while True:
            if self._tail is None and self._stop():
                self._tail = self.rng.randint(0, self.policy.extra_rounds)
            if self._tail is not None:
                if self._tail == 0:
                    return
                self._tail -= 1
            yield self.round_size()

    def largest_round(self) -> int:
        return max(1, self.policy.calls_per_sync + self.policy.extra_calls)

    def round_size(self) -> int:
        """`calls_per_sync` plus a random 0..`extra_calls`."""
        return max(1, self.policy.calls_per_sync + self.rng.randint(0, self.policy.extra_calls))

    def record(self, samples_ms: Sequence[float]) -> None:
        self.samples_ms.extend(samples_ms)
        self._recorded += 1

    def _stop(self) -> bool:
        p, xs = self.policy, self.samples_ms
        if self._recorded < self.min_rounds:
            return False
        if len(xs) >= p.max_runs or (xs and time.monotonic() > self._deadline):
            return True
        return precise_enough(xs, p.target_rel_ci, p.min_runs)


def measure(
    fn: Callable[..., Any],
    inputs_for: Callable[[int], Sequence[Any]],
    device: torch.device,
    policy: TimingPolicy,
    rng: random.Random | None = None,
) -> Measurement:
    """Time `fn(*inputs)` in this process by the same rounds the candidate gets (baselines, vetting,
    benchmarks). `inputs_for(k)` is the k-th call's input set (fresh inputs for baselines; a pool rotated
    by the caller where that is enough)."""
    timer = RoundTimer(device, policy.flush_bytes)
    plan = RoundPlan(policy, rng or random.Random())
    start = time.perf_counter()
    calls = 0

    def sets(n: int) -> Iterator[Sequence[Any]]:
        nonlocal calls
        for _ in range(n):
            calls += 1
            yield inputs_for(calls - 1)

    timer.run(fn, sets(plan.warmup()))
    warmup_calls = calls + _settle(timer, fn, sets, plan)
    last = None
    for n in plan.rounds():
        done = timer.run(fn, sets(n))
        plan.record(done.samples_ms)
        last = done.outputs[-1]
    stats = summarize(plan.samples_ms, method_name(device)).model_copy(update={"warmup_calls": warmup_calls})
    return Measurement(stats, last, time.perf_counter() - start, plan.samples_ms)


def _settle(
    timer: RoundTimer,
    fn: Callable[..., Any],
    sets: Callable[[int], Iterator[Sequence[Any]]],
    plan: RoundPlan,
) -> int:
    """Warm-up rounds until two in a row have medians within `settle_rel` of each other, or
    `settle_share` of the budget is spent; the calls it made."""
    p = plan.policy
    deadline = time.monotonic() + p.budget_s * p.settle_share
    size = max(1, p.calls_per_sync)
    previous, calls = None, 0
    while time.monotonic() < deadline:
        current = statistics.median(timer.run(fn, sets(size)).samples_ms)
        calls += size
        if previous is not None and abs(current - previous) <= p.settle_rel * max(previous, 1e-9):
            break
        previous = current
    return calls


def rotating(pool: Sequence[Sequence[Any]]) -> Callable[[int], Sequence[Any]]:
    """`inputs_for` over a fixed pool (trusted callers: vetting, benchmarks)."""
    return lambda k: pool[k % len(pool)]


def measure_graph(
    fn: Callable[..., Any],
    inputs: Sequence[Any],
    device: torch.device,
    calls: int = 20,
    rounds: int = 10,
    flush_bytes: int = 256 * 1024 * 1024,
) -> TimingStats:
    """Device time per call without the CPU's launch overhead, for kernels of a few microseconds.

    `calls` calls, each after an L2 flush, are captured in one CUDA graph; a second graph holds the
    flushes alone; per call = (replay of the first - replay of the second) / calls. The input values
    stay fixed across calls, so this is shown beside the reward's timing, never used for it.
    """
    staging = [a.clone() if isinstance(a, torch.Tensor) else a for a in inputs]
    flush = torch.empty(flush_bytes // 4, dtype=torch.float32, device=device)
    current = torch.cuda.current_stream(device)
    side = torch.cuda.Stream(device)
    side.wait_stream(current)
    with torch.cuda.stream(side):  # warm-up off the capture stream, as torch.cuda.graphs asks
        for _ in range(3):
            fn(*staging)
    current.wait_stream(side)
    torch.cuda.synchronize(device)
    work, flushes = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(work):
        for i in range(calls):
            flush.fill_(float(i))
            fn(*staging)
    with torch.cuda.graph(flushes):
        for i in range(calls):
            flush.fill_(float(i))

    def replay(graph: torch.cuda.CUDAGraph) -> float:
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        begin.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize(device)
        return begin.elapsed_time(end)

    replay(work), replay(flushes)
    samples = [max(0.0, (replay(work) - replay(flushes)) / calls) for _ in range(rounds)]
    return summarize(samples, f"cuda-graph-replay x{calls}+l2-flush, flushes subtracted")
