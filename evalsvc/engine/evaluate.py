"""One evaluation: judge a compiled artifact, reward it, and return one result document.

`Evaluator` is the GPU side (it never compiles); `LocalPipeline` is compile-then-evaluate for the CLI.
Every failure of the candidate becomes a status here, and our own bugs an `internal_error` document.
"""

from __future__ import annotations

import logging
import tempfile
import time
import traceback
from pathlib import Path

import torch

from evalsvc.compiler.stage import Compiler
from evalsvc.core.options import EvalOptions
from evalsvc.core.outcomes import compile_failure, failure
from evalsvc.core.profiles import CandidateProfile, mark_own
from evalsvc.core.results import (
    CompileReport,
    EvaluationResult,
    FailureKind,
    Provenance,
    Speedup,
    Status,
    Timings,
)
from evalsvc.core.rewards import SpeedupEvidence, rests_on_uncertain, speedup_evidence
from evalsvc.core.solutions import TRITON, InvalidSolution, Solution
from evalsvc.core.tasks import InvalidTask, TaskSpec
from evalsvc.engine.device_info import device_name, nvml_snapshot
from evalsvc.engine.judge import Judge, Verdict
from evalsvc.engine.reference import ReferenceFailed
from evalsvc.store.artifacts import ArtifactStore

progress = logging.getLogger("evalsvc.progress")  # stage by stage, for a person waiting (`evalsvc eval`)


class Evaluator:
    def __init__(self, judge: Judge, store: ArtifactStore, worker: str | None = None) -> None:
        self.judge = judge
        self.store = store
        self.worker = worker

    def evaluate(
        self,
        task_spec: TaskSpec,
        solution: Solution,
        artifact_key: str,
        report: CompileReport,
        options: EvalOptions,
    ) -> EvaluationResult:
        start = time.monotonic()
        try:
            result = self._evaluate(task_spec, solution, artifact_key, report, options)
        except Exception as e:  # a bug of ours; the document still says what happened
            tb = "".join(traceback.format_exception(type(e), e, e.__traceback__, limit=-3))
            msg = f"internal error: {tb[-2000:]}"
            result = failure(
                Status.INTERNAL_ERROR, msg, options, compile=report, failure=FailureKind.WORKER_ERROR
            )
        result.duration_s = time.monotonic() - start
        result.solution_format = solution.kind
        return result

    def _evaluate(
        self,
        task_spec: TaskSpec,
        solution: Solution,
        artifact_key: str,
        report: CompileReport,
        options: EvalOptions,
    ) -> EvaluationResult:
        try:  # the task is loaded (in its own process) before anything of the candidate is fetched
            with self.judge.tasks.using(task_spec), tempfile.TemporaryDirectory(prefix="evalsvc-art-") as tmp:
                artifact = Path(tmp) / "artifact"
                if not self.store.fetch(artifact_key, artifact):
                    msg = f"artifact {artifact_key} is not in the store"
                    return failure(Status.INTERNAL_ERROR, msg, options)
                verdict = self.judge.evaluate(task_spec, artifact, options)
        except (InvalidTask, ReferenceFailed) as e:  # the task's own code failed
            why = "invalid task" if isinstance(e, InvalidTask) else "the task failed"
            return failure(
                Status.INTERNAL_ERROR,
                f"{why}: {e}",
                options,
                compile=report,
                failure=FailureKind.TASK_INVALID,
            )
        return self._result(verdict, report, task_spec, solution, options, artifact_key)

    def _result(
        self,
        verdict: Verdict,
        report: CompileReport,
        task_spec: TaskSpec,
        solution: Solution,
        options: EvalOptions,
        artifact_key: str,
    ) -> EvaluationResult:
        t = verdict.timings
        evidence = speedup_evidence(t.candidate, t.eager, t.compiled)
        # A speed the hardware cannot back is reported but earns nothing beyond correctness; nor does the
        # Triton interpreter's (CPU device): it times NumPy running the kernel program by program.
        interpreted = solution.kind == TRITON and self.judge.device.type == "cpu"
        scored = SpeedupEvidence() if verdict.review or interpreted else evidence
        if interpreted:
            _label_interpreter(t)
        reward, milestone = options.schedule.score(verdict.status, scored)
        ok = verdict.status is Status.OK
        decisions = options.schedule.decisions(scored) if ok else []
        device = self.judge.device
        snap = nvml_snapshot(device)
        prov = Provenance(
            device=str(device),
            device_name=device_name(device),
            driver=snap.get("driver"),
            torch_version=torch.__version__,
            cuda_version=torch.version.cuda,
            toolchain_hash=artifact_key,
            sm_clock_mhz=snap.get("sm_clock_mhz"),
            temperature_c=snap.get("temperature_c"),
            tf32=task_spec.meta.tf32,
            seeds=verdict.seeds,
            task_hash=task_spec.id,
            solution_hash=solution.id,
            worker=self.worker,
        )
        return EvaluationResult(
            status=verdict.status,
            failure=verdict.failure,
            correct=ok,
            reward=reward,
            milestone=milestone,
            message=verdict.message,
            speedup=_speedup(evidence) if ok else Speedup(),
            decisions=decisions,
            uncertain=rests_on_uncertain(decisions, milestone),
            timings=t,
            correctness=verdict.correctness,
            compile=report,
            findings=verdict.findings + verdict.review,
            task_warnings=verdict.task_warnings + _slow_compile(t) + [INTERPRETER_WARNING] * interpreted,
            provenance=prov,
            roofline=verdict.roofline if ok else None,
            profile=_own_kernels(verdict.profile, report),
        )


INTERPRETER_WARNING = (
    "Triton on the CPU device: the kernels ran in Triton's interpreter (TRITON_INTERPRET=1), so the "
    "candidate's timing is interpreter time; it earns no speed milestone (correctness only)"
)


def _label_interpreter(t: Timings) -> None:
    """The candidate's timing method says it was the interpreter's."""
    if t.candidate is not None:
        t.candidate.method = f"{t.candidate.method}+triton-interpreter"


def _slow_compile(t: Timings) -> list[str]:
    """torch.compile slower than eager beyond both intervals: what beating it is worth, said in the result."""
    if t.eager is None or t.compiled is None or t.compiled.ci95_low_ms <= t.eager.ci95_high_ms:
        return []
    return [
        f"torch.compile[{t.compile_mode}] takes {t.compiled.median_ms:.4g} ms against eager's "
        f"{t.eager.median_ms:.4g} ms: its wrapper's host work (guards, launches) outweighs what it saves on "
        "a model this small, so a speedup over it says little beyond the speedup over eager"
    ]


def _speedup(ev: SpeedupEvidence) -> Speedup:
    return Speedup(
        eager=ev.eager,
        compile=ev.compile,
        eager_ci95=ev.interval("eager"),
        compile_ci95=ev.interval("compile"),
    )


def _own_kernels(profile: CandidateProfile | None, report: CompileReport) -> CandidateProfile | None:
    """Which traced kernels are the solution's own: those its ptxas report names."""
    if profile is not None and profile.trace is not None:
        profile.own_share = mark_own(profile.trace.kernels, [k.kernel for k in report.resources])
    return profile


class LocalPipeline:
    """Compile, then evaluate, in this process: the CLI's `eval`."""

    def __init__(self, compiler: Compiler, evaluator: Evaluator) -> None:
        self.compiler = compiler
        self.evaluator = evaluator

    def evaluate(self, task_spec: TaskSpec, solution: Solution, options: EvalOptions) -> EvaluationResult:
        start = time.monotonic()
        try:
            solution.check_layout()
            task_spec.check_syntax()
        except (InvalidSolution, InvalidTask) as e:
            status = Status.INTERNAL_ERROR if isinstance(e, InvalidTask) else Status.COMPILE_ERROR
            return failure(status, str(e), options)
        progress.info("compiling")
        outcome = self.compiler.compile(solution, task_spec.meta.allow_vendor_libs, task_spec)
        report = outcome.report
        took = "cached" if report and report.cached else f"in {report.duration_s if report else 0.0:.1f} s"
        progress.info("compile: %s, %s", outcome.status.value, took)
        if outcome.status is not Status.OK or outcome.artifact_key is None:
            result = compile_failure(
                outcome.status, outcome.message, outcome.report, outcome.findings, options
            )
        else:
            result = self.evaluator.evaluate(
                task_spec, solution, outcome.artifact_key, outcome.report, options
            )
        result.duration_s = time.monotonic() - start
        result.solution_format = solution.kind
        return result
