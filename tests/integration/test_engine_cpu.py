"""Real compiles in the Docker sandbox and real evaluations on the CPU device, over the bundled suite."""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

import pytest
import torch

from evalsvc.core.options import EvalOptions
from evalsvc.core.results import Status
from evalsvc.core.tasks import TaskSpec
from evalsvc.engine.judged_timing import JUDGED_ROUNDS
from evalsvc.engine.reference import load_message
from evalsvc.engine.taskload import input_digest, load_task
from evalsvc.sandbox.isolation import RUNNER_UIDS, SANDBOX_UID, runner_uid
from evalsvc.suite import cases
from tests.corpus.reader import small_task

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
    result = pipeline.evaluate(small_task(case.task_id), case.solution(), FAST)
    expected = EXPECT[case.expect]
    assert result.status is expected, result.message
    if expected is Status.OK:
        assert result.correct and result.reward >= 1
        assert result.timings.candidate is not None and result.timings.eager is not None
        judged = result.timings.candidate_judged  # the judge's figure rests on several rounds
        assert judged is not None and judged.rounds >= JUDGED_ROUNDS, judged
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
    pipeline.evaluate(small_task(case.task_id), case.solution(), FAST)
    outcome = pipeline.compiler.compile(case.solution())
    assert outcome.status is Status.OK and outcome.report.cached


def test_torch_compile_baseline_and_reward(pipeline) -> None:  # type: ignore[no-untyped-def]
    case = next(c for c in cases("cpu") if c.task_id == "l1/relu" and c.expect == "ok")
    opts = EvalOptions(trials=2, timing_budget_s=0.5, compile_baseline=True, timing_pool=2)
    result = pipeline.evaluate(small_task(case.task_id), case.solution(), opts)
    assert result.status is Status.OK
    assert result.timings.compiled is not None and result.speedup.compile is not None
    assert result.milestone in (1, 2, 3)


def _real_uid(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("Uid:")[1].split()[0])


def _can_signal(uid: int, pid: int) -> bool:
    """Whether a process running as `uid` may send `pid` a signal (signal 0: checked, not sent)."""
    child = os.fork()
    if child == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.kill(pid, 0)
            os._exit(0)
        except PermissionError:
            os._exit(1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    assert code in (0, 1), code
    return code == 0


def test_runners_alive_at_once_run_as_different_uids_of_their_device(pipeline) -> None:  # type: ignore[no-untyped-def]
    """RLIMIT_NPROC counts every process and thread of a uid on the host: runners of different GPUs, and
    the compile sandbox, must not share one uid's budget. Spares wait beside the candidate, and several
    evaluations are in flight on a GPU worker: every runner alive at once has a uid of its own (a
    candidate cannot SIGSTOP the runner of the next evaluation), and a freed uid goes to the back of the
    line."""
    uids = {runner_uid(d, slot) for d in ("cpu", "cuda", "cuda:1") for slot in range(RUNNER_UIDS)}
    assert len(uids | {SANDBOX_UID}) == 3 * RUNNER_UIDS + 1
    assert runner_uid("cuda") == runner_uid("cuda:0")
    with pytest.raises(ValueError):
        runner_uid("cuda", RUNNER_UIDS)
    launcher = pipeline.evaluator.judge.launcher
    if not launcher.isolate:
        pytest.skip("runner isolation needs root")
    case = next(c for c in cases("cpu") if c.task_id == "l1/relu" and c.expect == "ok")
    outcome = pipeline.compiler.compile(case.solution())
    with tempfile.TemporaryDirectory() as tmp:
        artifact = Path(tmp) / "artifact"
        assert pipeline.evaluator.store.fetch(outcome.artifact_key, artifact)
        launcher.close()
        first = launcher.start(artifact)  # no spare yet: started on demand
        launcher.prestart()  # two spares wait in line
        second = launcher.start(artifact)  # the older spare ...
        third = launcher.start(artifact)  # ... and the one that waited beside it
        handles = [first, second, third]
    try:
        for handle in handles:
            handle.wait_ready(120)
            assert _real_uid(handle.proc.pid) == handle.uid
            assert (handle.scratch / "artifact").stat().st_uid == handle.uid
        assert len({h.uid for h in handles}) == 3 and {h.uid for h in handles} <= set(launcher.uids)
        assert _can_signal(second.uid, second.proc.pid)  # the probe works: its own uid's runner
        assert not _can_signal(second.uid, third.proc.pid)
        assert not _can_signal(third.uid, first.proc.pid)
        first.close()
        assert launcher._free_uids[-1] == first.uid  # freed last, so taken last
        with launcher.borrowed_uid() as uid:  # the Nsight target's: no live runner's
            assert uid not in {h.uid for h in handles}
    finally:
        for handle in handles:
            handle.close()
        launcher.close()


def test_a_spare_taken_while_the_launcher_settles_starts_for_both(pipeline) -> None:  # type: ignore[no-untyped-def]
    """`settle` (before a CPU timing) and an evaluation that takes the same spare both wait for its ready
    signal: one reads it, the other must see it read, not wait on an empty pipe until its timeout."""
    launcher = pipeline.evaluator.judge.launcher
    with tempfile.TemporaryDirectory() as tmp:
        artifact = _relu_artifact(pipeline, tmp)
        launcher.close()
        launcher.prestart()
        settled = threading.Thread(target=launcher.settle)
        settled.start()  # polls the spares' pipes while they start
        handle = launcher.start(artifact)  # takes the older spare, not yet ready
        try:
            handle.wait_ready(30)
            settled.join(60)
            assert not settled.is_alive() and handle.ready
        finally:
            handle.close()
            launcher.close()


def _relu_artifact(pipeline, tmp: str) -> Path:  # type: ignore[no-untyped-def]
    case = next(c for c in cases("cpu") if c.task_id == "l1/relu" and c.expect == "ok")
    outcome = pipeline.compiler.compile(case.solution())
    artifact = Path(tmp) / "artifact"
    assert pipeline.evaluator.store.fetch(outcome.artifact_key, artifact)
    return artifact


def test_runner_makes_inputs_from_seeds_and_refuses_a_wrong_digest(pipeline) -> None:  # type: ignore[no-untyped-def]
    """The judge sends the task and a seed and the digest of its own inputs; the runner makes the same set
    itself, or says it differs (and then runs nothing)."""
    case = next(c for c in cases("cpu") if c.task_id == "l1/relu" and c.expect == "ok")
    task = load_task(small_task(case.task_id))
    judge = pipeline.evaluator.judge
    device = torch.device("cpu")
    with tempfile.TemporaryDirectory() as tmp:
        handle = judge.launcher.start(_relu_artifact(pipeline, tmp))
    try:
        reference = task.make_model(1, device)
        inputs = task.make_inputs(7, device)
        prepare = {"op": "prepare", "task": task.spec.model_dump_json(), "seeds": [7], "outputs": [],
                   "digests": [input_digest(inputs)], "flush_bytes": 0}  # fmt: skip
        assert handle.request(prepare, 120)["ok"]
        assert handle.request(load_message(list(task.get_init_inputs()), reference.state_dict(), False), 120)[
            "ok"
        ]
        seeded = {"op": "run", "seed": 7, "digest": input_digest(inputs), "poison_bytes": 0}
        reply = handle.request(seeded, 60)
        assert reply["ok"], reply
        assert torch.equal(reply["output"], torch.relu(inputs[0]))
        wrong = input_digest(task.make_inputs(8, device))
        reply = handle.request({**seeded, "digest": wrong}, 60)
        assert reply == {"ok": False, "kind": "inputs_differ", "error": reply["error"]}
    finally:
        handle.close()


UNREPRODUCIBLE = """
import os
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    # values from the OS, not the seed: a runner cannot make the judge's set itself
    return [torch.frombuffer(bytearray(os.urandom(4 * 256)), dtype=torch.float32).nan_to_num().clamp(-9, 9)]


def get_init_inputs():
    return []
"""


def _evaluate_seeing_the_runner(pipeline, spec: TaskSpec):  # type: ignore[no-untyped-def]
    """Evaluate the honest ReLU on `spec`; also return the runner's handle (to see how inputs went)."""
    case = next(c for c in cases("cpu") if c.task_id == "l1/relu" and c.expect == "ok")
    judge = pipeline.evaluator.judge
    launcher = judge.launcher
    handles = []
    start = launcher.start
    launcher.start = lambda artifact: handles.append(start(artifact)) or handles[-1]
    judge.seeded_inputs = True  # as on a GPU (the CPU device sends input sets: cheaper there)
    try:
        result = pipeline.evaluate(spec, case.solution(), FAST)
    finally:
        del launcher.start  # the class's method again
        judge.seeded_inputs = judge.device.type == "cuda"
    return result, handles[0]


def test_runner_makes_the_inputs_of_a_seeded_task(pipeline) -> None:  # type: ignore[no-untyped-def]
    case = next(c for c in cases("cpu") if c.task_id == "l1/relu" and c.expect == "ok")
    result, handle = _evaluate_seeing_the_runner(pipeline, small_task(case.task_id))
    assert result.status is Status.OK, result.message
    assert handle.makes_inputs  # no input set was sent


def test_task_whose_inputs_do_not_reproduce_is_still_judged_on_the_judges_inputs(pipeline) -> None:  # type: ignore[no-untyped-def]
    spec = TaskSpec(source=UNREPRODUCIBLE, name="relu_from_urandom")
    result, handle = _evaluate_seeing_the_runner(pipeline, spec)
    assert result.status is Status.OK, result.message
    assert result.correctness is not None and all(t.passed for t in result.correctness.trials)
    assert not handle.makes_inputs  # the runner said its set differed; the judge sent them
