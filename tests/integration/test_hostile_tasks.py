"""Hostile tasks (issue 20, item 2): a task's module body, Model and get_inputs are a tenant's code, and
run in a process of their own with a candidate's isolation, never in the judge.

Each case under tests/corpus/hostile_tasks is a task file with its trick and expected verdict in its
header, evaluated with an honest (or a wrong) candidate through the local pipeline (Docker compile
sandbox, isolated CPU-device runner and task process). For each: the expected status and message,
nothing reached the listener, the planted secret is not in the result, no process of a runner or task
uid was left behind, and the worker goes on judging: the ordinary task after it gives an honest candidate
`ok` and a wrong one `incorrect` (so nothing the task patched reached the judge's comparisons).
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalsvc.cli_files import read_solution, read_task
from evalsvc.core.options import EvalOptions
from evalsvc.core.pools import VetPolicy
from evalsvc.core.results import FailureKind, Status
from evalsvc.engine.launcher import RunnerLimits
from evalsvc.engine.reference import ReferenceFailed
from evalsvc.settings import Settings
from tests.corpus.reader import header
from tests.integration.test_hostile import Listener, _orphans, _reset_peak_rss, _vm_kib

ROOT = Path(__file__).parents[2]
CORPUS = ROOT / "tests" / "corpus" / "hostile_tasks"
PLAIN_TASK = ROOT / "tests" / "corpus" / "hostile" / "task.py"
HONEST = ROOT / "evalsvc" / "examples" / "l1" / "relu" / "cpu_ok.py"
WRONG = ROOT / "evalsvc" / "examples" / "l1" / "relu" / "cpu_wrong.py"
SECRET_PATH = Path("/var/tmp/evalsvc-planted-secret")
OPTS = EvalOptions(trials=2, timing_budget_s=0.2, compile_baseline=False, timing_pool=2)
CASES = sorted(CORPUS.glob("*.py"))

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def pipeline(cpu_settings: Settings):  # type: ignore[no-untyped-def]
    from evalsvc.wiring import make_local_pipeline

    settings = cpu_settings.model_copy(update={"compile_timeout_s": 90.0})
    pipe = make_local_pipeline(settings)
    # A task that hangs is cut off after this (120 s in service); room for a start on a busy machine.
    pipe.evaluator.judge.launcher.limits = RunnerLimits(
        memory_bytes=4 * 1024**3, load_timeout_s=30.0, call_timeout_s=15.0
    )
    yield pipe
    pipe.evaluator.judge.close()


@pytest.fixture(scope="module")
def planted() -> Iterator[str]:
    token = secrets.token_hex(16)
    SECRET_PATH.write_text(token)
    SECRET_PATH.chmod(0o600)
    os.environ["EVALSVC_PLANTED_SECRET"] = token  # the judge's own environment
    yield token
    os.environ.pop("EVALSVC_PLANTED_SECRET", None)
    SECRET_PATH.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def listener() -> Iterator[Listener]:
    lst = Listener(47614)
    yield lst
    lst.stop.set()
    lst.sock.close()


def _states(uid: int) -> list[str]:
    """The scheduler state (R, S, T, ...) of every process running as `uid`."""
    states = []
    for pid in (int(d) for d in os.listdir("/proc") if d.isdigit()):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            states.append(fields["State"].split()[0])
    return states


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_hostile_task(pipeline, planted: str, listener: Listener, path: Path) -> None:  # type: ignore[no-untyped-def]
    meta = header(path)
    task = read_task(path)
    judge = pipeline.evaluator.judge
    if meta.get("path") in ("vet", "profile"):  # what the task's process answers there is checked too
        with pytest.raises(ReferenceFailed, match="not finite") as refused:
            judge.vet(task, VetPolicy(), "cpu") if meta["path"] == "vet" else judge.profile(task)
        assert planted not in str(refused.value)
        _follow_up(pipeline)
        return
    candidate = read_solution(WRONG if meta["candidate"] == "wrong" else HONEST)
    base_kib = _reset_peak_rss()
    result = pipeline.evaluate(task, candidate, OPTS)
    growth_mib = (_vm_kib("VmHWM") - base_kib) >> 10
    message = result.message or ""
    print(f"{path.stem}: expected {meta['expect']}, got {result.status.value}: {message[:160]!r}")
    assert result.status is Status(meta["expect"]), message
    if "failure" in meta:
        assert result.failure is FailureKind(meta["failure"]), result
    if "message" in meta:
        assert meta["message"] in message, message
    assert planted not in result.model_dump_json()
    assert listener.received == []
    assert _orphans() == []  # nothing the task started outlives its process
    if "judge_growth_max_mib" in meta:  # what the task made the judge itself hold, at its peak
        limit = int(meta["judge_growth_max_mib"])
        assert growth_mib <= limit, f"the judge's peak RSS grew by {growth_mib} MiB"
    if meta.get("kept") == "closed":  # holding too much to be kept for the next evaluation
        assert task.id not in judge.tasks._processes
    if meta.get("kept") == "stopped":  # kept for the next evaluation of the task, and stopped meanwhile
        process = judge.tasks._processes[task.id]
        deadline = time.monotonic() + 10  # a stop signal lands when each process next enters the kernel
        while set(states := _states(process.handle.uid)) != {"T"} and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(states) >= 2 and set(states) == {"T"}, states  # the task's process and its child
    _follow_up(pipeline)


def _follow_up(pipeline) -> None:  # type: ignore[no-untyped-def]
    """The same worker goes on judging: the ordinary task's honest candidate ok, a wrong one incorrect."""
    plain = read_task(PLAIN_TASK)
    honest = pipeline.evaluate(plain, read_solution(HONEST), OPTS)
    assert honest.status is Status.OK, honest.message
    wrong = pipeline.evaluate(plain, read_solution(WRONG), OPTS)
    assert wrong.status is Status.INCORRECT, wrong.message
