"""The runner's autotune report is an untrusted reply: entries that do not read as one are dropped, sizes
and numbers bounded."""

from evalsvc.engine.trials import MAX_TUNINGS, reported_tunings

GOOD = {"kernel": "relu_kernel", "config": "BLOCK: 2048, num_warps: 4", "configs": 2, "tuning_ms": 3.5}


def test_well_formed_entries_are_kept() -> None:
    [choice] = reported_tunings([GOOD])
    assert (choice.kernel, choice.configs, choice.tuning_ms) == ("relu_kernel", 2, 3.5)


def test_malformed_entries_are_dropped() -> None:
    bad = [
        {**GOOD, "tuning_ms": float("nan")},
        {**GOOD, "tuning_ms": -1.0},
        {**GOOD, "configs": "two"},
        {**GOOD, "kernel": "k" * 10_000},
        {"kernel": "relu_kernel"},
        "relu_kernel",
        None,
    ]
    assert reported_tunings(bad) == []
    assert reported_tunings({"not": "a list"}) == []
    assert reported_tunings(None) == []


def test_at_most_max_tunings() -> None:
    assert len(reported_tunings([GOOD] * (MAX_TUNINGS * 10))) == MAX_TUNINGS
