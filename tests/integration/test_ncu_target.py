"""The process Nsight Compute profiles, started without ncu on the CPU device: it loads a real compiled
candidate, runs it confined, exits cleanly, and keeps the candidate's output out of its stdout (which is
ncu's report, so a candidate printing CSV rows could otherwise forge metrics)."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest
import torch

from evalsvc.core.solutions import Solution
from evalsvc.engine.ncu import NcuProbe, target_command
from evalsvc.engine.reference import load_message
from evalsvc.engine.taskload import load_task
from evalsvc.sandbox.isolation import runner_uid
from evalsvc.suite import cases

pytestmark = pytest.mark.docker
FORGED = '"ID","Kernel Name","gpu__time_duration.sum"'


def test_the_profiled_process_runs_the_candidate_and_keeps_its_output_off_the_report(pipeline) -> None:  # type: ignore[no-untyped-def]
    case = next(c for c in cases("cpu") if c.task_id == "l1/relu" and c.expect == "ok")
    source = case.solution().files["solution.py"]
    call = "        return relu_ext.relu_forward("
    printing = source.replace(call, f"        print({FORGED!r}, flush=True)\n{call}")
    assert printing != source
    outcome = pipeline.compiler.compile(Solution(files={"solution.py": printing}))
    assert outcome.artifact_key, outcome
    task = load_task(case.task())
    device = torch.device("cpu")
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp).chmod(0o755)  # as the scratch root: the sandbox uid passes through to its own directory
        art = Path(tmp) / "artifact"
        assert pipeline.evaluator.store.fetch(outcome.artifact_key, art)
        work = Path(tmp) / "work"
        work.mkdir()
        probe = NcuProbe("ncu", Path(tmp), isolate=True, memory_bytes=8 << 30)
        load = load_message(list(task.get_init_inputs()), task.make_model(1, device).state_dict(), False)
        probe.stage(work, art, load, task.make_inputs(1, device), device, runner_uid("cpu"))
        run = subprocess.run(target_command(work), capture_output=True, text=True, timeout=300)
        log = (work / "candidate.log").read_text()
    assert run.returncode == 0, run.stdout + run.stderr + log
    assert FORGED not in run.stdout
    assert log.count(FORGED) == 2  # the two forward calls ncu would profile
