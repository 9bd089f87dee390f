"""Real compiles in the Docker sandbox and real evaluations on the CPU device, over the bundled suite."""

from __future__ import annotations

import pytest

from evalsvc.core.options import EvalOptions
from evalsvc.core.results import Status
from evalsvc.suite import cases

FAST = EvalOptions(trials=3, timing_budget_s=0.3, compile_baseline=False, timing_pool=2)
EXPECT = {
    "ok": Status.OK,
    "incorrect": Status.INCORRECT,
    "compile_error": Status.COMPILE_ERROR,
    "runtime_error": Status.RUNTIME_ERROR,
}

pytestmark = pytest.mark.docker


@pytest.mark.parametrize("case", cases("cpu"), ids=lambda c: c.name)
def test_bundled_cpu_solution_gets_its_verdict(pipeline, case) -> None:  # type: ignore[no-untyped-def]
    result = pipeline.evaluate(case.task(), case.solution(), FAST)
    expected = EXPECT[case.expect]
    assert result.status is expected, result.message
    if expected is Status.OK:
        assert result.correct and result.reward >= 1
        assert result.timings.candidate is not None and result.timings.eager is not None
        assert result.provenance is not None and len(result.provenance.seeds) >= 4
    else:
        assert result.reward == -1 and not result.correct
    if expected is Status.COMPILE_ERROR:
        assert result.compile is not None and result.compile.diagnostics, result.compile
        err = result.compile.diagnostics[0]
        assert err.severity == "error" and err.line is not None and err.file
    if expected is Status.INCORRECT:
        assert result.correctness is not None and result.correctness.first_failure is not None


def test_second_evaluation_hits_the_compile_cache(pipeline) -> None:  # type: ignore[no-untyped-def]
    case = next(c for c in cases("cpu") if c.task_id == "l1/relu" and c.expect == "ok")
    pipeline.evaluate(case.task(), case.solution(), FAST)
    outcome = pipeline.compiler.compile(case.solution())
    assert outcome.status is Status.OK and outcome.report.cached


def test_torch_compile_baseline_and_reward(pipeline) -> None:  # type: ignore[no-untyped-def]
    case = next(c for c in cases("cpu") if c.task_id == "l1/relu" and c.expect == "ok")
    opts = EvalOptions(trials=2, timing_budget_s=0.5, compile_baseline=True, timing_pool=2)
    result = pipeline.evaluate(case.task(), case.solution(), opts)
    assert result.status is Status.OK
    assert result.timings.compiled is not None and result.speedup.compile is not None
    assert result.milestone in (1, 2, 3)
