"""Several evaluations in flight on one judge (a GPU worker's threads), with real runners and compiles:
each keeps its own verdict, and nothing of another evaluation runs while one is timed."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest

from evalsvc.core.options import EvalOptions
from evalsvc.core.results import Status
from evalsvc.engine.runner_session import RunnerSession
from evalsvc.engine.trials import Trials
from evalsvc.suite import cases
from tests.corpus.reader import small_task

FAST = EvalOptions(trials=3, timing_budget_s=0.2, compile_baseline=False, timing_pool=2)
EXPECT = {"ok": Status.OK, "incorrect": Status.INCORRECT, "runtime_error": Status.RUNTIME_ERROR}

pytestmark = pytest.mark.docker


class Intervals:
    """(thread, kind, start, end) of the judge's phases, as they happen."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, str, float, float]] = []
        self._lock = threading.Lock()

    def add(self, kind: str, start: float) -> None:
        with self._lock:
            self.rows.append((threading.get_ident(), kind, start, time.monotonic()))

    def wrap(self, obj: Any, name: str, kind: str) -> None:
        fn = getattr(obj, name)

        def timed(*a: Any, **k: Any) -> Any:
            start = time.monotonic()
            try:
                return fn(*a, **k)
            finally:
                self.add(kind, start)

        setattr(obj, name, timed)

    def overlaps(self, a: str, b: str) -> list[tuple[Any, Any]]:
        """Pairs of an `a` and a `b` interval of different threads that overlap in time."""
        xs = [r for r in self.rows if r[1] == a]
        ys = [r for r in self.rows if r[1] == b]
        return [(x, y) for x in xs for y in ys if x[0] != y[0] and x[2] < y[3] and y[2] < x[3]]


def test_evaluations_in_flight_keep_their_verdicts_and_are_timed_alone(pipeline) -> None:  # type: ignore[no-untyped-def]
    picked = [c for c in cases("cpu") if c.expect in EXPECT and c.task_id in ("l1/relu", "l2/gemm_bias_relu")]
    outcomes = {c.name: pipeline.compiler.compile(c.solution()) for c in picked}
    assert all(o.artifact_key for o in outcomes.values())
    evaluator = pipeline.evaluator
    judge = evaluator.judge
    seen = Intervals()
    quiet = judge.quiet

    @contextmanager
    def observed_quiet() -> Iterator[None]:
        with quiet():
            start = time.monotonic()
            try:
                yield
            finally:
                seen.add("timed", start)

    judge.quiet = observed_quiet  # type: ignore[method-assign]
    # a runner's start may overlap timing on a GPU; never its kernels (the candidate's load, its trials)
    untimed = [(RunnerSession, "load"), (Trials, "run")]
    originals = [(cls, name, vars(cls)[name]) for cls, name in untimed]
    for cls, name in untimed:
        seen.wrap(cls, name, "untimed")
    try:

        def run(case):  # type: ignore[no-untyped-def]
            o = outcomes[case.name]
            return case, evaluator.evaluate(
                small_task(case.task_id), case.solution(), o.artifact_key, o.report, FAST
            )

        with ThreadPoolExecutor(3) as pool:
            done = list(pool.map(run, picked * 2))
    finally:
        vars(judge).pop("quiet", None)
        for cls, name, fn in originals:
            setattr(cls, name, fn)
    for case, result in done:
        assert result.status is EXPECT[case.expect], (case.name, result.message)
        if result.status is Status.OK:
            assert result.timings.candidate is not None and result.correctness is not None
            assert all(t.passed for t in result.correctness.trials)
    assert sum(r[1] == "timed" for r in seen.rows) >= 4
    assert seen.overlaps("timed", "untimed") == []  # nothing of another evaluation beside a timing
    assert seen.overlaps("timed", "timed") == []
    assert seen.overlaps("untimed", "untimed")  # while their untimed work did run side by side
