"""One evaluation end to end: compile (or cache hit), judge, reward, one result document.

The CLI and the workers both call this; every failure of the candidate becomes a status here.
"""

from __future__ import annotations

import tempfile
import time
import traceback
from pathlib import Path

import torch

from evalsvc.build.stage import CompileOutcome, Compiler
from evalsvc.core.options import EvalOptions
from evalsvc.core.results import EvaluationResult, Provenance, Speedup, Status
from evalsvc.core.rewards import speedup_evidence
from evalsvc.core.solutions import InvalidSolution, Solution
from evalsvc.core.tasks import InvalidTask, TaskSpec
from evalsvc.engine.device_info import device_name, nvml_snapshot
from evalsvc.engine.judge import Judge, Verdict
from evalsvc.engine.taskload import load_task
from evalsvc.store.artifacts import ArtifactStore


def failure(status: Status, message: str, options: EvalOptions, **extra: object) -> EvaluationResult:
    reward, milestone = options.schedule.score(status, speedup_evidence(None, None, None))
    return EvaluationResult(status=status, reward=reward, milestone=milestone, message=message, **extra)


class Engine:
    def __init__(
        self, compiler: Compiler, judge: Judge, store: ArtifactStore, worker: str | None = None
    ) -> None:
        self.compiler = compiler
        self.judge = judge
        self.store = store
        self.worker = worker

    def compile(self, solution: Solution) -> CompileOutcome:
        return self.compiler.compile(solution)

    def evaluate(self, task_spec: TaskSpec, solution: Solution, options: EvalOptions) -> EvaluationResult:
        start = time.monotonic()
        try:
            result = self._evaluate(task_spec, solution, options)
        except Exception as e:  # a bug of ours; the document still says what happened
            tb = "".join(traceback.format_exception(type(e), e, e.__traceback__, limit=-3))
            result = failure(Status.INTERNAL_ERROR, f"internal error: {tb[-2000:]}", options)
        result.duration_s = time.monotonic() - start
        return result

    def _evaluate(self, task_spec: TaskSpec, solution: Solution, options: EvalOptions) -> EvaluationResult:
        try:
            solution.check_layout()
            task = load_task(task_spec)
        except (InvalidSolution, InvalidTask) as e:
            return failure(
                Status.INTERNAL_ERROR if isinstance(e, InvalidTask) else Status.COMPILE_ERROR, str(e), options
            )
        outcome = self.compiler.compile(solution)
        if outcome.status is not Status.OK or outcome.artifact_key is None:
            return failure(
                outcome.status,
                outcome.message or "compilation failed",
                options,
                compile=outcome.report,
                findings=outcome.findings,
            )
        with tempfile.TemporaryDirectory(prefix="evalsvc-art-") as tmp:
            artifact = Path(tmp) / "artifact"
            if not self.store.fetch(outcome.artifact_key, artifact):
                return failure(Status.INTERNAL_ERROR, "artifact vanished from the store", options)
            verdict = self.judge.evaluate(task, artifact, options)
        return self._result(verdict, outcome, task_spec, solution, options)

    def _result(
        self,
        verdict: Verdict,
        outcome: CompileOutcome,
        task_spec: TaskSpec,
        solution: Solution,
        options: EvalOptions,
    ) -> EvaluationResult:
        t = verdict.timings
        evidence = speedup_evidence(t.candidate, t.eager, t.compiled)
        reward, milestone = options.schedule.score(verdict.status, evidence)
        device = self.judge.device
        snap = nvml_snapshot(device)
        prov = Provenance(
            device=str(device),
            device_name=device_name(device),
            driver=snap.get("driver"),
            torch_version=torch.__version__,
            cuda_version=torch.version.cuda,
            toolchain_hash=self.compiler.toolchain.hash,
            sm_clock_mhz=snap.get("sm_clock_mhz"),
            temperature_c=snap.get("temperature_c"),
            tf32=task_spec.meta.tf32,
            seeds=verdict.seeds,
            task_hash=task_spec.id,
            solution_hash=solution.id,
            worker=self.worker,
        )
        ok = verdict.status is Status.OK
        return EvaluationResult(
            status=verdict.status,
            correct=ok,
            reward=reward,
            milestone=milestone,
            message=verdict.message,
            speedup=Speedup(eager=evidence.eager, compile=evidence.compile) if ok else Speedup(),
            timings=t,
            correctness=verdict.correctness,
            compile=outcome.report,
            findings=verdict.findings,
            provenance=prov,
        )
