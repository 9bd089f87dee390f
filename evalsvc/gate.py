"""`evalsvc gate`: run a suite's solutions, hold each result to its expectations, report for CI (a table,
JUnit XML, JSON) and give the exit code a CI job gates on."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalsvc.core.results import EvaluationResult, Status
from evalsvc.suite import SuiteCase, SuiteError, load

PASSED, FAILED, COULD_NOT_RUN = 0, 1, 3


@dataclass
class CaseOutcome:
    """One solution of the suite: its result, the expectations it missed, or why it could not be judged."""

    case: SuiteCase
    suite: str
    result: EvaluationResult | None = None
    missed: list[str] = field(default_factory=list)
    error: str | None = None  # the case was not judged (the service or the judge failed, not the kernel)
    seconds: float = 0.0

    @property
    def verdict(self) -> str:
        return "error" if self.error else "failed" if self.missed else "passed"


def suite_files(path: Path) -> list[Path]:
    """A suite file, or every *.json file in a folder (sorted); SuiteError when there is none."""
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not files:
        raise SuiteError(f"{path}: no suite files (*.json) in this folder")
    return files


def cases_for(path: Path, device_kind: str) -> list[tuple[str, SuiteCase]]:
    """(suite name, case) for every case of the suite(s) at `path` written for `device_kind`."""
    return [(f.stem, c) for f in suite_files(path) for c in load(f) if c.device == device_kind]


def missed(case: SuiteCase, result: EvaluationResult) -> list[str]:
    """Each expectation of `case` the result does not meet, said as a CI log line would say it."""
    out = []
    if result.status.value != case.expect:
        out.append(f"expected {case.expect}, got {result.status.value}")
    if case.min_reward is not None and (result.reward is None or result.reward < case.min_reward):
        out.append(f"reward {result.reward} below {case.min_reward}")
    for name, bound, got in (
        ("eager", case.min_speedup_eager, result.speedup.eager),
        ("torch.compile", case.min_speedup_compile, result.speedup.compile),
    ):
        if bound is not None and (got is None or got < bound):
            out.append(f"speedup over {name} {_num(got)} below {bound:g}")
    return out


def judge(suite: str, case: SuiteCase, result: EvaluationResult, seconds: float) -> CaseOutcome:
    """An outcome: an internal error the suite did not expect means the case was not judged."""
    if result.status is Status.INTERNAL_ERROR and case.expect != Status.INTERNAL_ERROR.value:
        error = f"internal_error: {result.message or 'no message'}"
        return CaseOutcome(case, suite, result, error=error, seconds=seconds)
    return CaseOutcome(case, suite, result, missed(case, result), seconds=seconds)


def run(
    cases: list[tuple[str, SuiteCase]], evaluate: Callable[[SuiteCase], EvaluationResult]
) -> Iterator[CaseOutcome]:
    """Each case evaluated in turn by `evaluate`, its outcome as soon as it is known."""
    for suite, case in cases:
        started = time.monotonic()
        result = evaluate(case)
        yield judge(suite, case, result, time.monotonic() - started)


def exit_code(outcomes: Iterable[CaseOutcome]) -> int:
    """3 when a case could not be judged, else 1 when an expectation failed, else 0."""
    verdicts = {o.verdict for o in outcomes}
    return COULD_NOT_RUN if "error" in verdicts else FAILED if "failed" in verdicts else PASSED


def junit(outcomes: list[CaseOutcome]) -> bytes:
    """JUnit XML: a testsuite per suite file, a testcase per solution (classname the task id), a failure
    per missed expectation, an error where the case could not be judged."""
    root = ET.Element("testsuites", name="evalsvc gate")
    for suite in dict.fromkeys(o.suite for o in outcomes):
        mine = [o for o in outcomes if o.suite == suite]
        node = ET.SubElement(
            root,
            "testsuite",
            name=suite,
            tests=str(len(mine)),
            failures=str(sum(o.verdict == "failed" for o in mine)),
            errors=str(sum(o.verdict == "error" for o in mine)),
            time=f"{sum(o.seconds for o in mine):.3f}",
        )
        for o in mine:
            case = ET.SubElement(
                node, "testcase", classname=o.case.task_id, name=o.case.name, time=f"{o.seconds:.3f}"
            )
            body = _summary(o.result)
            if o.error:
                ET.SubElement(case, "error", message=o.error, type="not_judged").text = body
            elif o.missed:
                ET.SubElement(case, "failure", message="; ".join(o.missed), type="expectation").text = body
            if body:
                ET.SubElement(case, "system-out").text = body
    for key in ("tests", "failures", "errors"):
        root.set(key, str(sum(int(s.get(key, "0")) for s in root)))
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def report(outcomes: list[CaseOutcome]) -> dict[str, Any]:
    """The JSON report: the exit code, counts, and each case with its expectations and result document."""
    return {
        "exit_code": exit_code(outcomes),
        "counts": {v: sum(o.verdict == v for o in outcomes) for v in ("passed", "failed", "error")},
        "cases": [
            {
                "suite": o.suite,
                "task": o.case.task_id,
                "solution": o.case.name,
                "verdict": o.verdict,
                "missed": o.missed,
                "error": o.error,
                "expect": {"status": o.case.expect}
                | {
                    k: v
                    for k, v in (
                        ("min_reward", o.case.min_reward),
                        ("min_speedup_eager", o.case.min_speedup_eager),
                        ("min_speedup_compile", o.case.min_speedup_compile),
                    )
                    if v is not None
                },
                "seconds": round(o.seconds, 3),
                "result": o.result.model_dump(mode="json") if o.result else None,
            }
            for o in outcomes
        ],
    }


def _summary(result: EvaluationResult | None) -> str:
    if result is None:
        return ""
    parts = [f"status {result.status.value}", f"reward {result.reward}"]
    if result.speedup.eager is not None:
        parts.append(f"speedup eager {_num(result.speedup.eager)}")
    if result.speedup.compile is not None:
        parts.append(f"speedup torch.compile {_num(result.speedup.compile)}")
    if result.message:
        parts.append(result.message)
    return "; ".join(parts)


def _num(x: float | None) -> str:
    return "none" if x is None else f"{x:.3g}"
