"""The candidate's timing as the judge drives and checks it (trusted side).

The candidate's calls must run where its kernels launch, in its own runner process, and native code can
rewrite anything in that process: its clocks, the statistics, the reply on the wire. So nothing the runner
reports is taken as is:
- the judge plans the rounds (which input sets, how many calls, when to stop, with random extras);
- it times every round with its own clock, from sending the request to receiving the answer, and
  calibrates the runner's own cost per call on a null candidate before the candidate is imported;
- every round's answer commits to every output by chunk digests; the judge then fetches chunks of calls it
  picks at random and checks them against its digests and the reference, so doing less work on any timed
  call is caught with a probability that grows with every call it is done on;
- the runner's per-call times (CUDA events, or the wall clock on the CPU) give the median its precision
  only where they agree with the judge's clock: a median faster than the judge's own figure allows is
  refused (`timing_unconfirmed`).
- on the CPU device the judge also reads the runner's CPU time from outside (the kernel's CPU clock of
  that process, every thread, the ones gone too): a busy host stretches a round's wall time, not the CPU
  time it took, so the figure that bounds the median is the lower of the two.
"""

from __future__ import annotations

import logging
import math
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeGuard

import torch

from evalsvc.core.results import JudgedTiming, TimingStats
from evalsvc.engine.commitment import chunk, chunk_count, chunk_digest, output_tensors
from evalsvc.engine.compare import compare
from evalsvc.engine.cpu_attribution import Attribution, FileId, library_share
from evalsvc.engine.messages import FetchRequest, RoundRequest, Subject
from evalsvc.engine.timing import RoundPlan, TimingPolicy

log = logging.getLogger("evalsvc.judged_timing")

NULL_ROUNDS = 5
CHECK_PROBABILITY = 0.15  # per call; every round also gets at least one checked call
CHUNKS_PER_TENSOR = 2
# How far the runner's median may sit under the judge's own figure before it is refused: a share of that
# figure, plus a multiple of how much the runner's own cost per call varied over the null rounds (on a
# busy host that spread, not the kernel, is what the judge's figure is unsure by).
RELATIVE_SLACK = 0.15
NOISE_SLACK = 2.0
# CPU device: half of the runner's own cost may be the host's load drifting since the calibration, not the
# candidate (docs/performance.md).
CPU_DRIFT_SLACK = 0.5
# The judge's figure is its fastest candidate round: one round alone carries any stall of the host or the
# GPU into the figure (an honest two-kernel sum judged on one round read 1.67x its kernel time on an H100).
JUDGED_ROUNDS = 3


class TimingRefused(Exception):
    """The timing cannot be believed or a checked output is wrong; `status` and `rule` say how."""

    def __init__(self, status: str, message: str, rule: str) -> None:
        super().__init__(message)
        self.status = status
        self.rule = rule


@dataclass
class Overhead:
    """The runner's own cost per call (copying inputs, the flush, allocating outputs, the digests), as the
    judge's clock saw it on the null candidate."""

    per_call_ms: list[float] = field(default_factory=list)
    per_call_cpu_ms: list[float] = field(default_factory=list)  # the runner's CPU time (CPU device)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.per_call_ms) if self.per_call_ms else 0.0

    @property
    def min_ms(self) -> float:
        return min(self._middle(), default=0.0)

    @property
    def max_ms(self) -> float:
        return max(self._middle(), default=0.0)

    def _middle(self) -> list[float]:
        """The rounds without the fastest and the slowest: one odd round (a first null round at 2.5x the
        others on the H200) must not widen the noise allowance past what a forgery needs."""
        xs = sorted(self.per_call_ms)
        return xs[1:-1] if len(xs) > 2 else xs


@dataclass
class RoundAnswer:
    samples_ms: list[float]
    digests: list[list[list[int]]]
    wall_ms: float
    cpu_ms: float | None = None  # the runner's CPU time over the round, where the judge can read it


def process_cpu_ms(pid: int) -> float | None:
    """CPU time of process `pid` (all its threads, live and exited) in ms, read from outside it through
    the kernel's per-process CPU clock (clock_getcpuclockid); None once it is gone."""
    try:
        return time.clock_gettime_ns(((~pid) << 3) | 2) / 1e6  # CPUCLOCK_SCHED of the whole process
    except OSError:
        return None


class RoundRunner:
    """Asks the runner for rounds and checks their answers. Every call gets a fresh seed drawn here: with
    `seeded`, the runner makes the call's inputs from it (the task reproduces there); otherwise this side
    makes them and sends them with the round. `ask(msg) -> reply` is the judge's request to the runner
    (errors already turned into verdicts); `make_inputs(seed)` and `reference(inputs)` are answered by the
    task's process."""

    def __init__(
        self,
        ask: Callable[[RoundRequest | FetchRequest], dict[str, Any]],
        make_inputs: Callable[[int], list[Any]],
        reference: Callable[[list[Any]], Any],
        check: Callable[[Any, Any], tuple[bool, str | None]],
        rng: random.Random,
        seeded: bool,
        outputs_on: str,
        cpu_clock: Callable[[], float | None] | None = None,
    ) -> None:
        self.ask = ask
        self.outputs_on = outputs_on  # the device type the runner's outputs (and digests) were made on
        self.cpu_clock = cpu_clock
        self.make_inputs = make_inputs
        self.reference = reference
        self.check = check
        self.rng = rng
        # Which calls and chunks are checked: not from the stream the seeds come from (a GPU runner is sent
        # the seeds, enough Mersenne Twister output to recover its state and foresee the picks; red team 11).
        self.picker = random.SystemRandom()
        self.seeded = seeded
        self.checked_calls = 0
        self.calls: dict[str, int] = {}  # per subject, warm-up rounds included (what a sampler saw)

    def run(self, subject: Subject, calls: int) -> RoundAnswer:
        self.calls[subject] = self.calls.get(subject, 0) + calls
        seeds = [self.rng.getrandbits(62) for _ in range(calls)]
        msg: RoundRequest = {"op": "round", "subject": subject}
        sent: list[list[Any]] = []
        if self.seeded:
            msg["seeds"] = seeds
        elif subject == "null":  # trusted: the runner's cost to take a set does not depend on its values
            template = self.make_inputs(seeds[0])
            sent = [[_copy(a) for a in template] for _ in seeds]
            msg["sets"] = sent
        else:
            sent = [self.make_inputs(s) for s in seeds]
            msg["sets"] = sent
        cpu_start = self.cpu_clock() if self.cpu_clock else None
        start = time.perf_counter()
        reply = self.ask(msg)
        wall_ms = (time.perf_counter() - start) * 1e3
        cpu_end = self.cpu_clock() if self.cpu_clock else None
        cpu_ms = cpu_end - cpu_start if cpu_start is not None and cpu_end is not None else None
        samples, digests = reply.get("samples_ms"), reply.get("digests")
        if not _numbers(samples, calls) or not isinstance(digests, list) or len(digests) != calls:
            raise TimingRefused("forbidden", "the runner's answer to a round is malformed", "forged_message")
        answer = RoundAnswer([float(s) for s in samples], digests, wall_ms, cpu_ms)
        if (probes := reply.get("probes_us")) and log.isEnabledFor(logging.DEBUG):  # the runner's word
            shown = str(probes)[:1000]  # for the log only, and cut: a hostile runner chooses its size
            log.debug(
                "%s round's probes (µs sync waited beyond idle, one-block kernel late): %s", subject, shown
            )
        if subject == "candidate":
            self._verify(answer, lambda j: sent[j] if sent else self.make_inputs(seeds[j]))
        return answer

    def _verify(self, answer: RoundAnswer, inputs_of: Callable[[int], list[Any]]) -> None:
        """Fetch chunks of randomly picked calls (decided after the answer) and check them."""
        n = len(answer.digests)
        pick = self.picker
        calls = [j for j in range(n) if pick.random() < CHECK_PROBABILITY] or [pick.randrange(n)]
        picks: list[tuple[int, int, int]] = []
        expected: list[tuple[int, torch.Tensor, int]] = []
        for j in calls:
            refs = output_tensors(self.reference(inputs_of(j)))
            committed = answer.digests[j]
            if not isinstance(committed, list) or len(committed) != len(refs):
                raise TimingRefused(
                    "incorrect",
                    f"timed call {j} returned {len(committed) if isinstance(committed, list) else '?'} "
                    f"output tensors, the reference {len(refs)}",
                    "timed_output_wrong",
                )
            for t, ref in enumerate(refs):
                count = chunk_count(ref.numel() * ref.element_size())
                if not isinstance(committed[t], list) or len(committed[t]) != count:
                    raise TimingRefused(
                        "incorrect",
                        f"timed call {j}: output {t} is not the size of the reference's",
                        "timed_output_wrong",
                    )
                for index in self.picker.sample(range(count), min(CHUNKS_PER_TENSOR, count)):
                    picks.append((j, t, index))
                    expected.append((committed[t][index], ref, index))
        fetch: FetchRequest = {"op": "fetch", "picks": picks}
        reply = self.ask(fetch)
        chunks = reply.get("chunks")
        if not isinstance(chunks, list) or len(chunks) != len(picks):
            raise TimingRefused("forbidden", "the runner's answer to a fetch is malformed", "forged_message")
        for (j, t, index), (digest, ref, _), got in zip(picks, expected, chunks, strict=True):
            self._check_chunk(j, t, index, digest, ref, got)
        self.checked_calls += len(calls)

    def _check_chunk(self, j: int, t: int, index: int, digest: Any, ref: torch.Tensor, got: Any) -> None:
        if (
            not isinstance(got, torch.Tensor)
            or got.dtype != torch.uint8
            or chunk_digest(got, self.outputs_on) != digest
        ):
            raise TimingRefused(
                "forbidden",
                f"timed call {j}: the output fetched after the round is not the one its answer committed to",
                "output_commitment_broken",
            )
        want = chunk(ref, index)
        if got.numel() != want.numel():
            size_message = f"timed call {j}: output {t} is not the size of the reference's"
            raise TimingRefused("incorrect", size_message, "timed_output_wrong")
        ok, message = self.check(got.to(want.device).view(ref.dtype), want.view(ref.dtype))
        if not ok:
            raise TimingRefused(
                "incorrect",
                f"timed call {j} (checked after the round, picked at random): {message} — the output of a "
                "timed call was wrong (caching, deferred or skipped work)",
                "timed_output_wrong",
            )


def calibrate(rounds: RoundRunner, policy: TimingPolicy, rng: random.Random) -> Overhead:
    """The null candidate's rounds (before the candidate is imported): the runner's own cost per call."""
    plan = RoundPlan(policy, rng)
    plan.warmup()
    rounds.run("null", plan.largest_round())  # grows and touches the transfer buffers first
    overhead = Overhead()
    for _ in range(NULL_ROUNDS):
        calls = plan.round_size()
        answer = rounds.run("null", calls)
        overhead.per_call_ms.append(answer.wall_ms / calls)
        log.debug(
            "null round: %d calls, %.1f µs per call on the judge's clock", calls, answer.wall_ms / calls * 1e3
        )
        if answer.cpu_ms is not None:
            overhead.per_call_cpu_ms.append(answer.cpu_ms / calls)
    if len(overhead.per_call_cpu_ms) < NULL_ROUNDS:
        overhead.per_call_cpu_ms = []  # the clock was not readable throughout: wall time only
    return overhead


@dataclass
class CandidateTiming:
    samples_ms: list[float]
    judged: JudgedTiming


def time_candidate(
    rounds: RoundRunner, policy: TimingPolicy, rng: random.Random, overhead: Overhead
) -> CandidateTiming:
    """The candidate's rounds, each timed by the judge and spot-checked; the samples for its median."""
    plan = RoundPlan(policy, rng, min_rounds=JUDGED_ROUNDS)
    plan.warmup()
    rounds.run("candidate", plan.largest_round())  # warm-up: timed by nobody, checked like any other
    per_call: list[float] = []
    per_call_cpu: list[float] = []
    reported: list[float] = []
    for calls in plan.rounds():
        answer = rounds.run("candidate", calls)
        plan.record(answer.samples_ms)
        per_call.append(answer.wall_ms / calls)
        reported.append(round_reported_ms(answer.samples_ms))
        log.debug(
            "candidate round: %d calls, %.1f µs per call on the judge's clock, runner's median %.1f µs",
            calls,
            answer.wall_ms / calls * 1e3,
            statistics.median(answer.samples_ms) * 1e3,
        )
        if answer.cpu_ms is not None:
            per_call_cpu.append(answer.cpu_ms / calls)
    cpu_figure = overhead.per_call_cpu_ms and len(per_call_cpu) == len(per_call)
    cpu_overhead = Overhead(overhead.per_call_cpu_ms)
    judged = JudgedTiming(
        per_call_ms=max(0.0, min(per_call) - overhead.median_ms),
        round_min_ms=min(per_call),
        round_min_reported_ms=reported[per_call.index(min(per_call))],
        overhead_ms=overhead.median_ms,
        overhead_min_ms=overhead.min_ms,
        overhead_max_ms=overhead.max_ms,
        rounds=len(per_call),
        calls_checked=rounds.checked_calls,
        cpu_per_call_ms=max(0.0, min(per_call_cpu) - cpu_overhead.median_ms) if cpu_figure else None,
        cpu_overhead_ms=cpu_overhead.median_ms if cpu_figure else None,
        cpu_overhead_spread_ms=cpu_overhead.max_ms - cpu_overhead.min_ms if cpu_figure else None,
        cpu_round_reported_ms=reported[per_call_cpu.index(min(per_call_cpu))] if cpu_figure else None,
    )
    return CandidateTiming(plan.samples_ms, judged)


def round_reported_ms(samples_ms: list[float]) -> float:
    """The runner's time per call over one round: the larger of its mean (what the judge's clock around
    the round measures) and its median (a stall inside one call stretches the mean, not the call)."""
    return max(statistics.fmean(samples_ms), statistics.median(samples_ms))


@dataclass
class JudgeFigure:
    """What the judge's own clock says of the candidate's time per call, and how unsure it is by."""

    figure_ms: float
    overhead_ms: float
    allowance_ms: float  # noise and drift of the runner's own cost, which the figure has had taken off
    clock: str
    reported_ms: float | None = None  # the runner's time per call in the round the figure comes from

    @property
    def floor_ms(self) -> float:
        return self.figure_ms * (1 - RELATIVE_SLACK) - self.allowance_ms

    @property
    def high_ms(self) -> float:
        return self.figure_ms * (1 + RELATIVE_SLACK) + self.allowance_ms


def judge_figure(judged: JudgedTiming, device_type: str) -> JudgeFigure:
    spread = judged.overhead_max_ms - judged.overhead_min_ms
    reported = judged.round_min_reported_ms
    if device_type != "cpu":
        return JudgeFigure(judged.per_call_ms, judged.overhead_ms, NOISE_SLACK * spread, "clock", reported)
    figure, overhead, clock = judged.per_call_ms, judged.overhead_ms, "clock"
    if judged.cpu_per_call_ms is not None and judged.cpu_per_call_ms < figure:
        figure, overhead, clock = judged.cpu_per_call_ms, judged.cpu_overhead_ms or 0.0, "CPU clock"
        spread, reported = judged.cpu_overhead_spread_ms or 0.0, judged.cpu_round_reported_ms
    allowance = NOISE_SLACK * spread + CPU_DRIFT_SLACK * overhead
    return JudgeFigure(figure, overhead, allowance, clock, reported)


def refuse_disagreement(median_ms: float, judged: JudgedTiming, device_type: str) -> None:
    """The runner's median must not be faster than the judge's clock allows, and on a GPU a round must
    not take less than the runner's own work does."""
    spread = judged.overhead_max_ms - judged.overhead_min_ms
    # Only on a GPU is the runner's own work (flushes, input generation) a steady cost to hold a round to.
    if device_type == "cuda" and judged.round_min_ms < judged.overhead_min_ms * (1 - RELATIVE_SLACK) - spread:
        raise TimingRefused(
            "forbidden",
            f"a round of timed calls took {judged.round_min_ms * 1e3:.1f} µs per call on the judge's clock, "
            f"less than the runner's own work ({judged.overhead_min_ms * 1e3:.1f} µs per call with a null "
            "candidate): the timing loop was altered",
            "timing_unconfirmed",
        )
    seen = judge_figure(judged, device_type)
    # The same round too: on a busy host the median of all rounds is stretched past the fastest round's
    # figure, so times scaled down throughout passed a floor set by that one round (CI, docs/security.md).
    claims = [("a median of", median_ms)]
    if seen.reported_ms is not None:
        claims.append(("in the judge's fastest round", seen.reported_ms))
    for what, claimed_ms in claims:
        if claimed_ms < seen.floor_ms:
            raise TimingRefused(
                "forbidden",
                f"the runner reported {what} {claimed_ms * 1e3:.1f} µs per call, but the judge's "
                f"{seen.clock} saw at least {seen.figure_ms * 1e3:.1f} µs per call (after the runner's own "
                f"{seen.overhead_ms * 1e3:.1f} µs): the reported times are not believed",
                "timing_unconfirmed",
            )


def confirmed_interval(stats: TimingStats, judged: JudgedTiming) -> TimingStats:
    """CPU device: the candidate's 95% interval reaches up to the slowest time per call the judge's clock
    allows. Where the runner's own cost per call dwarfs the kernel, the floor cannot hold a forged median
    up (red team 2026-12-05: times reported at 0.3x passed with reward 3), so the interval says how little
    the judge confirmed, and a reward decided on its low end does not rest on the runner's word."""
    high = max(stats.ci95_high_ms, judge_figure(judged, "cpu").high_ms)
    if high <= stats.ci95_high_ms or stats.median_ms <= 0:
        return stats
    half = (high - stats.ci95_low_ms) / 2
    return stats.model_copy(update={"ci95_high_ms": high, "rel_ci_halfwidth": half / stats.median_ms})


LIBRARY_SHARE_LIMIT = 0.5  # of the compute per timed call the candidate added to the null candidate's
MIN_ATTRIBUTED_SAMPLES = 50
MIN_LIBRARY_SAMPLES = 25  # library samples beyond the null's, over all timed calls: more than sampling noise


LIBRARY_EAGER_LIMIT = 0.5  # library CPU time per call beyond the null's, of eager PyTorch's time per call


class LibraryExcess(NamedTuple):
    share: float  # of the compute per call the candidate added, in libraries (0..1)
    samples: float  # library samples beyond the null candidate's, over the candidate's timed calls
    ms_per_call: float = 0.0  # the CPU time those samples stand for, per timed call


def library_excess(
    null: Attribution, null_calls: int, cand: Attribution, cand_calls: int, own: set[FileId]
) -> LibraryExcess:
    """Of the compute per call the candidate added to the runner's own (the null candidate's), the share
    that ran in libraries (code in no file counted too). Compute is library and own code: time in the
    runtimes (the interpreter, libc, libm, OpenMP) and the kernel is neither, so a candidate cannot dilute
    the share by burning it (a forge whose Python ran 15 samples per call read 0.2 of all samples, 0.9 of
    compute), and the runner's own per-call work cancels out with the null's, give or take its drift
    between the two phases (CPU_DRIFT_SLACK of it: making a seeded input on the runner read 13.3-19.0
    library samples per call from one evaluation to the next, docs/performance.md). The added compute is
    taken as at least half the candidate's, so a kernel that adds little does not turn noise into a share."""

    def per_call(a: Attribution, calls: int) -> tuple[float, float]:
        library = a.samples * library_share(a, set(), own_identities=own, count_anonymous=True)
        own_code = sum(n for name, n in a.by_file.items() if (ids := a.identities.get(name)) and ids <= own)
        return library / max(1, calls), (library + own_code) / max(1, calls)

    cand_library, cand_compute = per_call(cand, cand_calls)
    null_library, null_compute = per_call(null, null_calls)
    if cand_compute <= 0:
        return LibraryExcess(0.0, 0.0)
    added = max(cand_compute - null_compute, cand_compute / 2)
    # the runner's own library work per call drifts between the null's phase and the candidate's
    excess = cand_library - (1 + CPU_DRIFT_SLACK) * null_library
    share = min(1.0, max(0.0, excess / added))  # sampling noise can put the difference past the added time
    return LibraryExcess(share, max(0.0, excess) * max(1, cand_calls), max(0.0, excess) * cand.period_ms)


def refuse_library_compute(excess: LibraryExcess, cand: Attribution) -> None:
    if (
        cand.samples >= MIN_ATTRIBUTED_SAMPLES
        and excess.samples >= MIN_LIBRARY_SAMPLES
        and excess.share > LIBRARY_SHARE_LIMIT
    ):
        top = sorted(cand.by_file.items(), key=lambda kv: -kv[1])[:3]
        where = ", ".join(f"{name.rsplit('/', 1)[-1]} {n / cand.samples:.0%}" for name, n in top)
        raise TimingRefused(
            "forbidden",
            f"{excess.share:.0%} of the compute per timed call the candidate added to the runner's own ran "
            f"in libraries or generated code, not its own (sampled time by file: {where}): the kernel "
            "must be the solution's own",
            "library_compute",
        )


def refuse_library_beside_eager(excess: LibraryExcess, eager_ms: float) -> None:
    """However much own code runs beside it, a library that spends half of what eager PyTorch takes for the
    whole task per call is doing the task (red team 4: MKL computed 60 of 64 rows while the solution's own
    slow loop did 4, a share of compute of 0.35-0.38)."""
    if (
        excess.samples >= MIN_LIBRARY_SAMPLES
        and eager_ms > 0
        and excess.ms_per_call >= LIBRARY_EAGER_LIMIT * eager_ms
    ):
        raise TimingRefused(
            "forbidden",
            f"the candidate's calls spent {excess.ms_per_call:.3g} ms of CPU time each in libraries or "
            f"generated code beyond the runner's own, against {eager_ms:.3g} ms for eager PyTorch's whole "
            "forward: the kernel must be the solution's own",
            "library_compute",
        )


def _copy(x: Any) -> Any:
    """A set of the null rounds: a copy, cheaper than generating one (docs/performance.md)."""
    return x.clone() if isinstance(x, torch.Tensor) else x


def _numbers(xs: Any, n: int) -> TypeGuard[list[float]]:
    return (
        isinstance(xs, list)
        and len(xs) == n
        and all(isinstance(x, int | float) and math.isfinite(x) and x >= 0 for x in xs)
    )


def as_check(atol: float, rtol: float, relative: bool) -> Callable[[Any, Any], tuple[bool, str | None]]:
    def check(got: Any, want: Any) -> tuple[bool, str | None]:
        c = compare(got, want, atol, rtol, relative=relative)
        return c.passed, c.message

    return check
