"""Correctness: the task's own quality checks (once per task) and the candidate's trials, each output
compared with the reference's on the judge's inputs, the first trial's arithmetic checked on fp32 tasks."""

from __future__ import annotations

import threading
from functools import cache, partial
from typing import Any

from pydantic import ValidationError

from evalsvc.core.results import AutotuneChoice, Correctness, Status, TrialCheck
from evalsvc.core.tasks import Arithmetic, Precision
from evalsvc.engine.compare import compare
from evalsvc.engine.messages import MAX_TUNINGS, RunRequest
from evalsvc.engine.profiling import nbytes
from evalsvc.engine.reference import Reference
from evalsvc.engine.runner_session import RunnerSession, Stop, seeded_message
from evalsvc.engine.taskload import quality_warnings

MAX_POISON_BYTES = 1 << 30


class TaskQuality:
    """Thread-safe: the task's quality warnings, checked once per task and process, on two fixed input
    sets."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._quality: dict[str, list[str]] = {}

    def warnings(self, ref: Reference) -> list[str]:
        task_id = ref.spec.id
        if task_id not in self._quality:
            outs = [ref.forward(ref.inputs(s)) for s in (11, 12)]
            meta = ref.spec.meta
            warnings = quality_warnings(outs[0], outs[1], meta.atol, meta.rtol)
            with self._lock:
                self._quality[task_id] = warnings
        return list(self._quality[task_id])


class Trials:
    """One evaluation's trials: each checked into `correctness`; a task warning appended to
    `task_warnings` (the verdict's own lists). A failed check raises `Stop`."""

    def __init__(
        self, session: RunnerSession, ref: Reference, correctness: Correctness, task_warnings: list[str]
    ) -> None:
        self.session = session
        self.ref = ref
        self.correctness = correctness
        self.task_warnings = task_warnings
        self.autotune: list[AutotuneChoice] = []  # as the runner reported them (display only)

    def run(self, t: int, seed: int, candidate_first: bool, repeat: bool = False) -> None:
        """One trial; with `repeat` the candidate also gets the same inputs a second time, so call counting
        and work deferred to the next call show."""
        ref = self.ref
        inputs = ref.inputs(seed)
        size = nbytes(inputs)
        poison = min(MAX_POISON_BYTES, 2 * size)
        explicit: RunRequest = {"op": "run", "inputs": inputs, "poison_bytes": poison}
        seeded = cache(partial(seeded_message, explicit, seed))  # built once, only if the runner makes inputs
        if candidate_first:
            reply = self.session.ask_made(explicit, seeded, size)
            ref_out = ref.forward(inputs)
        else:
            ref_out = ref.forward(inputs)
            reply = self.session.ask_made(explicit, seeded, size)
        self.autotune += reported_tunings(reply.get("autotune"))[: MAX_TUNINGS - len(self.autotune)]
        self.check(reply["output"], ref_out, t, candidate_first)
        if t == 0:
            self.check_arithmetic(inputs, ref_out, reply["output"])
        if repeat:
            again = self.session.ask_made(explicit, seeded, size)
            self.check(again["output"], ref_out, t, False, " (same inputs, second call)")

    def check_arithmetic(self, inputs: list[Any], ref_out: Any, output: Any) -> None:
        """On an fp32 task: does the first trial's output show reduced-precision inputs the task does not
        allow (precision.py, run in the task's process)? A reference that cannot run in float64 leaves it
        unchecked, with a warning."""
        meta = self.ref.spec.meta
        corr = self.correctness
        policy = meta.arithmetic_policy
        corr.arithmetic = policy.value if meta.precision is Precision.FP32 else meta.precision.value
        if meta.precision is not Precision.FP32 or policy is Arithmetic.ANY:
            return
        found, unchecked = self.ref.arithmetic(inputs, ref_out, output, policy.allowed())
        if unchecked is not None:
            self.task_warnings.append(
                f"arithmetic not checked: the reference does not run in float64 ({unchecked})"[:300]
            )
            return
        corr.arithmetic_checked = True
        if found is not None:
            corr.first_failure = 0
            raise Stop(Status.INCORRECT, f"trial 0: {found}", rule="reduced_precision")

    def check(self, output: Any, ref_out: Any, t: int, candidate_first: bool, context: str = "") -> None:
        meta = self.ref.spec.meta
        corr = self.correctness
        cmp = compare(output, ref_out, meta.atol, meta.rtol, relative=corr.relative_check)
        corr.trials.append(
            TrialCheck(
                trial=t,
                passed=cmp.passed,
                candidate_first=candidate_first,
                max_abs_err=cmp.max_abs_err,
                max_rel_err=cmp.max_rel_err,
                message=cmp.message,
            )
        )
        corr.max_abs_err = max(corr.max_abs_err or 0.0, cmp.max_abs_err or 0.0)
        corr.max_rel_err = max(corr.max_rel_err or 0.0, cmp.max_rel_err or 0.0)
        if not cmp.passed:
            corr.first_failure = t
            raise Stop(Status.INCORRECT, f"trial {t}{context}: {cmp.message}")


def reported_tunings(reported: Any) -> list[AutotuneChoice]:
    """The runner's autotune report, each entry that reads as one (an untrusted reply: others dropped)."""
    if not isinstance(reported, list):
        return []
    choices = []
    for entry in reported[:MAX_TUNINGS]:
        try:
            choices.append(AutotuneChoice.model_validate(entry))
        except ValidationError:
            continue
    return choices
