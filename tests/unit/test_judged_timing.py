"""Output commitments and the judge's own timing figure, on real tensors (the protocol end to end runs in
tests/integration/test_engine_cpu.py and the exploit corpus)."""

from __future__ import annotations

import random
import subprocess
import sys
import time

import pytest
import torch

from evalsvc.core.results import JudgedTiming, Status, TimingStats
from evalsvc.core.rewards import MilestoneSchedule, speedup_evidence
from evalsvc.engine.commitment import chunk, chunk_count, chunk_digest, round_digests
from evalsvc.engine.cpu_attribution import ANON, Attribution
from evalsvc.engine.judged_timing import (
    JUDGED_ROUNDS,
    LIBRARY_SHARE_LIMIT,
    MIN_LIBRARY_SAMPLES,
    Overhead,
    TimingRefused,
    confirmed_interval,
    judge_figure,
    library_excess,
    process_cpu_ms,
    refuse_disagreement,
    refuse_library_beside_eager,
    refuse_library_compute,
    round_reported_ms,
)
from evalsvc.engine.timing import RoundPlan, RoundTimer, TimingPolicy, measure, rotating

SHAPES = [(1,), (3,), (7, 5), (256, 33), (4, 1000)]
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_every_chunk_matches_its_committed_digest(shape: tuple[int, ...], dtype: torch.dtype) -> None:
    t = (torch.randn(shape) * 100).to(dtype)
    (digests,), (nbytes,) = round_digests([[t, t.t() if t.dim() == 2 else t]])
    assert nbytes == [t.numel() * t.element_size()] * 2
    for tensor, committed in zip([t, t.t() if t.dim() == 2 else t], digests, strict=True):
        assert len(committed) == chunk_count(tensor.numel() * tensor.element_size())
        assert [chunk_digest(chunk(tensor, i), "cpu") for i in range(len(committed))] == committed


def test_a_changed_value_breaks_its_chunk_and_only_its_chunk() -> None:
    t = torch.randn(64, 64)
    (before,), _ = round_digests([t])
    u = t.clone()
    u[40, 3] += 1e-3
    (after,), _ = round_digests([u])
    changed = [i for i, (a, b) in enumerate(zip(before[0], after[0], strict=True)) if a != b]
    assert len(changed) == 1
    assert changed[0] == (40 * 64 + 3) * 4 // (len(chunk(t, 0)))


def test_the_cpu_digest_binds_where_the_word_sum_does_not() -> None:
    """The tenth red team matched the word sum with other bytes the tolerance accepts; the simplest such
    bytes: two 8-byte words swapped keep the sum, not the CPU's digest."""
    t = torch.arange(64, dtype=torch.float32)
    swapped = t.clone()
    swapped[[0, 1, 2, 3]] = t[[2, 3, 0, 1]]
    a, b = chunk(t, 0), chunk(swapped, 0)
    assert not torch.equal(a, b)
    assert chunk_digest(a, "cuda") == chunk_digest(b, "cuda")  # the device's sum: does not bind
    assert chunk_digest(a, "cpu") != chunk_digest(b, "cpu")
    (committed,), _ = round_digests([t])
    assert committed[0][0] == chunk_digest(a, "cpu") != chunk_digest(b, "cpu")


def test_round_timer_keeps_every_output_and_times_every_call() -> None:
    timer = RoundTimer(torch.device("cpu"), 0)
    sets = [[torch.full((8,), float(i))] for i in range(5)]
    done = timer.run(lambda x: x * 2, iter(sets))
    assert len(done.samples_ms) == 5 and all(s >= 0 for s in done.samples_ms)
    assert [float(o[0]) for o in done.outputs] == [0.0, 2.0, 4.0, 6.0, 8.0]


def test_round_plan_draws_sizes_and_a_random_tail() -> None:
    policy = TimingPolicy(min_runs=1, target_rel_ci=0.5, calls_per_sync=4, extra_calls=3, extra_rounds=2)
    tails = set()
    for seed in range(40):
        plan = RoundPlan(policy, random.Random(seed))
        plan.warmup()
        sizes = []
        for n in plan.rounds():
            sizes.append(n)
            plan.record([1.0] * n)  # perfectly precise: the stop rule fires after the first round
        assert all(4 <= n <= 7 for n in sizes)
        tails.add(len(sizes) - 1)
    assert tails == {0, 1, 2}  # the rounds after the stop rule are not predictable


def test_the_judges_figure_rests_on_several_rounds() -> None:
    """The stop rule waits for `min_rounds` rounds however precise the first was (the judge's figure is its
    fastest round: one round carries any stall into it)."""
    policy = TimingPolicy(min_runs=1, target_rel_ci=0.5, calls_per_sync=4, extra_calls=0, extra_rounds=0)
    for min_rounds, expected in ((1, 1), (JUDGED_ROUNDS, JUDGED_ROUNDS)):
        plan = RoundPlan(policy, random.Random(0), min_rounds=min_rounds)
        plan.warmup()
        count = 0
        for n in plan.rounds():
            count += 1
            plan.record([1.0] * n)
        assert count == expected
    assert JUDGED_ROUNDS >= 3


def test_measure_with_a_rotating_pool() -> None:
    pool = [[torch.randn(16)] for _ in range(3)]
    m = measure(torch.relu, rotating(pool), torch.device("cpu"), TimingPolicy(budget_s=0.2, min_runs=5))
    assert m.stats.n >= 5 and m.stats.method.startswith("wall-clock")


def _judged(per_call: float, round_min: float, overhead: float, spread: float = 0.0) -> JudgedTiming:
    return JudgedTiming(
        per_call_ms=per_call,
        round_min_ms=round_min,
        overhead_ms=overhead,
        overhead_min_ms=overhead - spread / 2,
        overhead_max_ms=overhead + spread / 2,
        rounds=3,
    )


def test_a_median_the_judges_clock_cannot_back_is_refused() -> None:
    judged = _judged(per_call=20.0, round_min=21.0, overhead=1.0)
    refuse_disagreement(18.0, judged, "cpu")  # within 15%
    with pytest.raises(TimingRefused) as e:
        refuse_disagreement(11.0, judged, "cpu")  # the red team's adaptive forgery: 0.55 of what was seen
    assert e.value.rule == "timing_unconfirmed"
    with pytest.raises(TimingRefused):
        refuse_disagreement(8.0, judged, "cuda")


def test_a_noisy_runner_overhead_widens_the_slack() -> None:
    judged = _judged(per_call=20.0, round_min=21.0, overhead=1.0, spread=4.0)  # null rounds 3 ms apart
    refuse_disagreement(10.0, judged, "cpu")  # 17 - 2 x 4: not refused
    with pytest.raises(TimingRefused):
        refuse_disagreement(8.0, judged, "cpu")


def test_on_the_cpu_the_runners_cpu_time_bounds_the_median_when_the_host_is_busy() -> None:
    """The CI run that refused honest ReLUs: a busy host doubled the rounds' wall time (judge's figure 0.91
    ms after 1.31 ms of the runner's own, median 0.44 ms); the runner's CPU time is not stretched so."""
    busy = _judged(per_call=0.91, round_min=2.22, overhead=1.31, spread=0.05)
    busy.cpu_per_call_ms, busy.cpu_overhead_ms, busy.cpu_overhead_spread_ms = 0.5, 1.2, 0.05
    refuse_disagreement(0.44, busy, "cpu")
    busy.cpu_per_call_ms = None  # no CPU clock: the wall figure less half the runner's own cost
    refuse_disagreement(0.44, busy, "cpu")
    with pytest.raises(TimingRefused, match="CPU clock"):  # a forgery is still a forgery
        forged = _judged(per_call=20.0, round_min=21.0, overhead=1.0)
        forged.cpu_per_call_ms, forged.cpu_overhead_ms, forged.cpu_overhead_spread_ms = 19.0, 0.9, 0.1
        refuse_disagreement(0.3 * 19.0, forged, "cpu")


def test_times_scaled_down_throughout_are_refused_on_a_busy_host() -> None:
    """CI at 2f7a6f6: a busy host stretched the runner's median to 1.85x the judge's fastest round, so the
    forge that reports every time at 0.4x (redteam_forge_reply_via_walked_dlsym) sat above the floor that
    round sets (9.35 ms against 9.11); in the fastest round itself its times were still 0.4x."""
    busy = _judged(per_call=12.647, round_min=14.555, overhead=1.908, spread=0.34)
    refuse_disagreement(9.354, busy, "cpu")  # the median alone: what CI passed
    busy.round_min_reported_ms = 0.4 * 12.6
    with pytest.raises(TimingRefused, match="fastest round") as e:
        refuse_disagreement(9.354, busy, "cpu")
    assert e.value.rule == "timing_unconfirmed"
    busy.round_min_reported_ms = 12.6  # honest in that round, its median stretched by the others
    refuse_disagreement(23.4, busy, "cpu")


def test_the_round_held_to_the_cpu_figure_is_the_one_it_comes_from() -> None:
    judged = _judged(per_call=20.0, round_min=21.0, overhead=1.0)
    judged.cpu_per_call_ms, judged.cpu_overhead_ms, judged.cpu_overhead_spread_ms = 10.0, 0.9, 0.1
    judged.round_min_reported_ms, judged.cpu_round_reported_ms = 4.0, 10.5  # the wall round is not used
    refuse_disagreement(10.5, judged, "cpu")
    judged.cpu_round_reported_ms = 4.0
    with pytest.raises(TimingRefused, match="CPU clock"):
        refuse_disagreement(10.5, judged, "cpu")


def test_a_rounds_reported_time_is_the_larger_of_its_mean_and_median() -> None:
    assert round_reported_ms([1.0, 1.0, 10.0]) == 4.0  # a stall inside a call: the mean, as the clock saw it
    assert round_reported_ms([0.0, 5.0, 5.0]) == 5.0


def test_the_cpu_clock_of_another_process_is_read_from_outside() -> None:
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\ntime.sleep(30)"
    proc = subprocess.Popen([sys.executable, "-c", spin])
    try:
        deadline = time.monotonic() + 60
        while (used := process_cpu_ms(proc.pid)) is not None and used < 300 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert used is not None and used >= 300  # its busy loop, counted while it sleeps on
    finally:
        proc.kill()
        proc.wait()
    assert process_cpu_ms(proc.pid) is None


def test_a_round_faster_than_the_runners_own_work_is_refused_on_a_gpu() -> None:
    judged = _judged(per_call=0.0, round_min=0.1, overhead=0.5)
    with pytest.raises(TimingRefused, match="timing loop was altered"):
        refuse_disagreement(0.05, judged, "cuda")
    refuse_disagreement(0.05, judged, "cpu")  # the runner's own work is not a steady cost there


def test_overhead_statistics_leave_one_odd_round_out() -> None:
    # The H200's null rounds for an honest ReLU at 68b9f10, one a first round at 2.5x the others: the
    # spread the noise allowance grows with is the middle rounds', not 2 ms.
    o = Overhead([3.095, 1.250, 1.292, 1.096, 1.2])
    assert (o.median_ms, o.min_ms, o.max_ms) == (1.25, 1.2, 1.292)
    assert (Overhead([1.0, 2.0]).min_ms, Overhead([1.0, 2.0]).max_ms) == (1.0, 2.0)  # too few to leave out


# The red team's run of 2026-12-05 (docs/results/cpu-2026-12-05-redteam-rewards/forge_const_run1.out):
# the judge's figures of one CPU evaluation of l1/relu, eager 0.6718 ms (0.6611-0.682, n 127).
RED_TEAM_JUDGED = JudgedTiming(
    per_call_ms=0.08606933505771774,
    round_min_ms=2.5268135714213713,
    overhead_ms=2.4407442363636536,
    overhead_min_ms=2.205194399903121,
    overhead_max_ms=2.637223333294969,
    rounds=7,
    cpu_per_call_ms=0.03864231298701615,
    cpu_overhead_ms=1.5438979727272715,
    cpu_overhead_spread_ms=0.4540124333333295,
)
EAGER = TimingStats(
    median_ms=0.6718,
    mean_ms=0.6718,
    iqr_ms=0.01,
    min_ms=0.65,
    max_ms=0.7,
    n=127,
    ci95_low_ms=0.6611,
    ci95_high_ms=0.682,
    rel_ci_halfwidth=0.0156,
    method="wall-clock",
)


def _reported(median: float, half: float) -> TimingStats:
    return TimingStats(
        median_ms=median,
        mean_ms=median,
        iqr_ms=half,
        min_ms=median - half,
        max_ms=median + half,
        n=80,
        ci95_low_ms=median - half,
        ci95_high_ms=median + half,
        rel_ci_halfwidth=half / median,
        method="wall-clock",
    )


def test_times_forged_under_the_runners_own_cost_earn_nothing_on_the_cpu() -> None:
    forged = _reported(0.28, 0.001)  # every call reported at 0.3x of the honest 0.92 ms, all alike
    refuse_disagreement(forged.median_ms, RED_TEAM_JUDGED, "cpu")  # the floor is negative: not refused
    before = speedup_evidence(forged, EAGER, None)
    assert before.eager_low is not None and before.eager_low > 1.05  # the hole: the runner's word passed
    widened = confirmed_interval(forged, RED_TEAM_JUDGED)
    assert widened.median_ms == forged.median_ms and widened.ci95_low_ms == forged.ci95_low_ms
    assert widened.ci95_high_ms == pytest.approx(judge_figure(RED_TEAM_JUDGED, "cpu").high_ms)
    after = speedup_evidence(widened, EAGER, None)
    assert after.eager_low is not None and after.eager_low < 1.05 < after.eager_high
    beats_eager, _ = MilestoneSchedule().decisions(after)
    assert not beats_eager.passed and beats_eager.uncertain
    assert MilestoneSchedule().score(Status.OK, after)[1] == 1


def test_a_kernel_the_judges_clock_confirms_keeps_its_interval() -> None:
    # A 15 ms kernel against the same runner costs: the judge's figure bounds it closely.
    judged = RED_TEAM_JUDGED.model_copy(update={"per_call_ms": 15.2, "cpu_per_call_ms": 15.0})
    honest = _reported(15.1, 0.2)
    refuse_disagreement(honest.median_ms, judged, "cpu")
    high = judge_figure(judged, "cpu").high_ms
    assert high == pytest.approx(15.0 * 1.15 + 2 * 0.4540124333333295 + 0.5 * 1.5438979727272715)
    widened = confirmed_interval(honest, judged)
    assert widened.ci95_high_ms == pytest.approx(high) and widened.ci95_high_ms < 1.3 * honest.median_ms


def _attribution(per_call: dict[str, float], calls: int) -> Attribution:
    by_file = {name: round(n * calls) for name, n in per_call.items()}
    return Attribution(samples=sum(by_file.values()), by_file=by_file, identities={OWN_PATH: {OWN_ID}})


OWN_PATH, OWN_ID = "/scratch/solution.so", (0, 99, 12345)
INTERPRETER = "[kernel]"  # like the interpreter and the C runtime, neither library nor own code
LIBTORCH = "/site-packages/torch/lib/libtorch_cpu.so"  # no identity the judge knows: library


@pytest.mark.parametrize("burnt", [0.0, 15.0, 60.0])
@pytest.mark.parametrize("runner", [1.5, 4.0, 8.0])
def test_time_burnt_outside_any_library_does_not_dilute_the_library_share(
    runner: float, burnt: float
) -> None:
    """MKL by memory walk as this CPU samples it (2026-12-06, docs/security.md): 4 library samples per call
    on a runner whose own work costs 1.5-2 per call, 0.4 of them in libtorch. The forge that rescales its
    reported times sometimes burnt 15 samples per call in the interpreter, which read as 0.2 of all
    samples; neither that nor a costlier runner moves the share of compute."""
    null = _attribution({INTERPRETER: runner, ANON: 0.4}, 70)
    cand = _attribution({INTERPRETER: runner + burnt, ANON: 4.4, OWN_PATH: 0.05}, 30)
    excess = library_excess(null, 70, cand, 30, {OWN_ID})
    assert excess.share > 0.9
    with pytest.raises(TimingRefused) as refused:
        refuse_library_compute(excess, cand)
    assert refused.value.rule == "library_compute"


def test_an_own_kernel_that_adds_little_keeps_a_small_share() -> None:
    """A ReLU barely slower than the null candidate (relu_cpu_scalar_loop: 4.45 samples per call against
    4.38): its output allocation's noise is not divided by the little compute it added."""
    null = _attribution({INTERPRETER: 2.0, ANON: 0.4}, 70)
    cand = _attribution({INTERPRETER: 2.0, ANON: 0.6, OWN_PATH: 0.3}, 30)
    excess = library_excess(null, 70, cand, 30, {OWN_ID})
    assert excess.share < LIBRARY_SHARE_LIMIT
    refuse_library_compute(excess, cand)


def test_the_runners_own_library_work_drifting_between_phases_is_not_the_candidates() -> None:
    """The seeded ReLU of CI at 4a83604 (this CPU): the runner's randn read 13.8 library samples per call
    in the null's phase and 17.1 in the candidate's, beside an own kernel of 2; eager ran 0.838 ms."""
    null = _attribution({LIBTORCH: 13.8, INTERPRETER: 4.0}, 70)
    cand = _attribution({LIBTORCH: 17.1, INTERPRETER: 4.0, OWN_PATH: 2.0}, 27)
    excess = library_excess(null, 70, cand, 27, {OWN_ID})
    refuse_library_compute(excess, cand)
    refuse_library_beside_eager(excess, eager_ms=0.838)


def test_mkl_beside_a_few_own_rows_is_refused_beside_eager() -> None:
    """rt4_mkl_diluted_by_own_rows as this CPU sampled it: 4.3-4.7 library samples per call against the
    null's 0.28-0.35, eager 2.34 ms; its own slow rows keep the share under the limit."""
    null = _attribution({LIBTORCH: 0.35, INTERPRETER: 2.0}, 70)
    cand = _attribution({LIBTORCH: 4.3, INTERPRETER: 2.0, OWN_PATH: 6.5}, 30)
    excess = library_excess(null, 70, cand, 30, {OWN_ID})
    refuse_library_compute(excess, cand)
    with pytest.raises(TimingRefused) as refused:
        refuse_library_beside_eager(excess, eager_ms=2.34)
    assert refused.value.rule == "library_compute"


def test_a_few_library_samples_are_noise_whatever_their_share() -> None:
    """Library samples beyond the null's must add up to more than sampling noise before a share counts."""
    null = _attribution({INTERPRETER: 2.0, ANON: 0.4}, 70)
    cand = _attribution({INTERPRETER: 6.0, ANON: 1.0, OWN_PATH: 0.1}, 30)
    excess = library_excess(null, 70, cand, 30, {OWN_ID})
    assert excess.share > LIBRARY_SHARE_LIMIT and excess.samples < MIN_LIBRARY_SAMPLES
    refuse_library_compute(excess, cand)
