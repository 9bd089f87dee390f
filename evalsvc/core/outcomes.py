"""Result documents for evaluations that end before judging (no torch needed to build them)."""

from __future__ import annotations

from evalsvc.core.options import EvalOptions
from evalsvc.core.results import CompileReport, EvaluationResult, Finding, Status
from evalsvc.core.rewards import speedup_evidence


def failure(status: Status, message: str, options: EvalOptions, **extra: object) -> EvaluationResult:
    """A terminal result with the schedule's failure reward."""
    reward, milestone = options.schedule.score(status, speedup_evidence(None, None, None))
    return EvaluationResult(status=status, reward=reward, milestone=milestone, message=message, **extra)


def compile_failure(
    status: Status, message: str | None, report: CompileReport, findings: list[Finding], options: EvalOptions
) -> EvaluationResult:
    """The result of a solution that did not compile (or was refused while compiling)."""
    return failure(status, message or "compilation failed", options, compile=report, findings=findings)


def cancelled(message: str) -> EvaluationResult:
    """The result of an evaluation its tenant cancelled before it ended: no verdict, hence no reward."""
    return EvaluationResult(status=Status.CANCELLED, reward=None, milestone=None, message=message)
