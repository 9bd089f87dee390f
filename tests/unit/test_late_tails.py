"""The rule that turns probes' late tails into a `side_stream_work` finding: most probes and at least two
must have found work left running, so one host hiccup in a sync never refuses an honest kernel, while a
candidate that hides work on most calls (what it takes to move the median) is found. The tails themselves
are measured on a GPU only (the corpus: cuda_rt_last_call_pad, cuda_rt2_probe_idle_gpu)."""

from __future__ import annotations

from evalsvc.engine.timing import LATE_TAIL_US, tails_left

QUIET, LATE = LATE_TAIL_US / 4, LATE_TAIL_US * 3


def test_one_late_probe_is_a_hiccup_not_a_finding() -> None:
    assert tails_left([]) == 0
    assert tails_left([LATE]) == 0
    assert tails_left([QUIET, LATE, QUIET, QUIET]) == 0


def test_late_work_on_most_calls_is_found() -> None:
    assert tails_left([LATE, LATE]) == 2
    assert tails_left([LATE, QUIET, LATE, QUIET]) == 2
    assert tails_left([LATE] * 7 + [QUIET] * 3) == 7


def test_a_minority_of_late_probes_is_not_enough() -> None:
    assert tails_left([LATE, LATE] + [QUIET] * 3) == 0
    assert tails_left([LATE_TAIL_US] * 4) == 0  # at the bound is not beyond it
