"""The rule that turns probes' late tails into a `side_stream_work` finding: most probes, and at least
three, must have found work left running, so a host hiccup in a sync never refuses an honest kernel, while
a candidate that hides work on most calls (what it takes to move the median) is found. The tails
themselves are measured on a GPU only (the corpus: cuda_rt_last_call_pad, cuda_rt2_probe_idle_gpu)."""

from __future__ import annotations

from evalsvc.engine.timing import (
    LATE_GAP_US,
    LATE_TAIL_SHARE,
    LATE_TAIL_US,
    MAX_OWN_GAP_US,
    Probe,
    own_gap,
    tails_left,
)

QUIET, LATE = Probe(LATE_TAIL_US / 4, 3.0, 100.0), Probe(LATE_TAIL_US * 3, 3.0, 100.0)


def test_one_late_probe_is_a_hiccup_not_a_finding() -> None:
    assert tails_left([]) == 0
    assert tails_left([LATE]) == 0
    assert tails_left([LATE, LATE]) == 0
    assert tails_left([QUIET, LATE, QUIET, QUIET]) == 0


def test_late_work_on_most_calls_is_found() -> None:
    assert tails_left([LATE, LATE, LATE]) == 3
    assert tails_left([LATE, QUIET, LATE, QUIET, LATE, QUIET]) == 3
    assert tails_left([LATE] * 7 + [QUIET] * 3) == 7


def test_a_minority_of_late_probes_is_not_enough() -> None:
    assert tails_left([LATE] * 3 + [QUIET] * 4) == 0
    assert tails_left([Probe(LATE_TAIL_US, LATE_GAP_US, 100.0)] * 4) == 0  # at the bound is not beyond it


def test_a_long_call_may_wait_a_share_of_its_own_time() -> None:
    call_us = 10 * LATE_TAIL_US / LATE_TAIL_SHARE  # a call so long that its share is ten times the floor
    assert tails_left([Probe(LATE_TAIL_US * 3, LATE_GAP_US * 3, call_us)] * 5) == 0
    assert tails_left([Probe(call_us * LATE_TAIL_SHARE * 1.5, 3.0, call_us)] * 5) == 5


def test_a_kernel_that_holds_the_sms_past_the_call_is_late_work() -> None:
    # The sync after it waits for nothing (the reads queued behind it), but a one-block kernel queued
    # right after the call started late (cuda_rt3_sm_hog_trailing_reads).
    held = Probe(0.0, LATE_GAP_US * 2, 250.0)
    assert tails_left([held] * 4) == 4
    assert tails_left([Probe(0.0, LATE_GAP_US / 2, 250.0)] * 4) == 0


def test_the_gap_is_judged_beyond_the_runners_own() -> None:
    """A GPU idle before the one-block kernel waits on the host: the null candidate's probes showed gaps of
    25-48 µs on an H100 (2026-12-07), where honest small kernels read 32-45 µs and were refused. The
    candidate's gap counts beyond the largest of the null's, which is capped."""
    honest = [Probe(20.0, 45.0, 250.0), Probe(20.0, 33.0, 250.0), Probe(16.0, 32.0, 250.0)]
    assert tails_left(honest) == 3  # against the fixed bound alone: refused (what the H100 run saw)
    null = [Probe(24.0, 41.3, 3.0), Probe(19.0, 32.4, 3.0), Probe(0.0, 0.0, 3.0)]
    assert own_gap(null) == 41.3 and tails_left(honest, own_gap(null)) == 0
    held = [Probe(0.0, own_gap(null) + LATE_GAP_US * 2, 250.0)] * 4  # SMs held well past the runner's own
    assert tails_left(held, own_gap(null)) == 4
    assert own_gap([]) == 0.0 and own_gap([Probe(0.0, 10 * MAX_OWN_GAP_US, 3.0)]) == MAX_OWN_GAP_US
