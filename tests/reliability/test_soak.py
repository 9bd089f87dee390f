"""The soak's short form (bench/soak.py has the long one): concurrent clients, a device worker and the
gateway killed while they submit; every accepted id ends exactly once and the counts reconcile."""

from __future__ import annotations

import pytest

from bench.live_stack import LiveStack
from bench.soak import run
from tests.reliability.conftest import REDELIVERY_S

pytestmark = pytest.mark.docker


def test_short_soak_loses_and_doubles_nothing(stack: LiveStack) -> None:
    report = run(
        stack,
        submissions=150,
        clients=8,
        fault_kinds=("kill -9 device worker", "kill -9 gateway"),
        fault_every_s=1.5,
        fault_window_s=10,
        honest_every=100,
        submit_limit_s=120,
        drain_limit_s=240,
        recheck_after_s=REDELIVERY_S + 2,
    )
    assert report.accepted == report.submissions, report
    assert sum(report.faults.values()) >= 1, report
    assert report.lost == 0 and report.duplicated == 0 and report.unexpected_merges == 0, report
    assert report.http_500 == 0 and report.wrong_verdicts == 0, report
    assert sum(report.by_status.values()) == report.distinct_jobs, report
    assert set(report.by_status) <= {"ok", "forbidden"}, report
    assert report.ok
