"""The rule that turns probes' late tails into a `side_stream_work` finding: most probes, and at least
three, must have found work left running, so a host hiccup in a sync never refuses an honest kernel, while
a candidate that hides work on most calls (what it takes to move the median) is found. The tails
themselves are measured on a GPU only (the corpus: cuda_rt_last_call_pad, cuda_rt2_probe_idle_gpu)."""

from __future__ import annotations

from evalsvc.engine.timing import LATE_GAP_US, LATE_TAIL_SHARE, LATE_TAIL_US, Probe, tails_left

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
