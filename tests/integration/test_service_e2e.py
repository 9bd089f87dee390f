"""The real stack end to end: redis-server, the uvicorn gateway, a Celery compile worker using the Docker
sandbox and two CPU-device workers on two queues. Nothing faked."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalsvc.core.options import EvalOptions
from evalsvc.records.documents import EvaluationRequest
from evalsvc.sdk import Client
from evalsvc.suite import cases
from tests.corpus.reader import small_task
from tests.live_stack import LiveStack, running_stack

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def stack(cpu_settings) -> Iterator[LiveStack]:  # type: ignore[no-untyped-def]
    with running_stack("evalsvc-e2e-", {"cpu-a": "gpu.cpu-a", "cpu-b": "gpu.cpu-b"}, 2) as s:
        yield s


def _case(task_id: str, expect: str):  # type: ignore[no-untyped-def]
    return next(c for c in cases("cpu") if c.task_id == task_id and c.expect == expect)


BATCH = 32
FAST = dict(trials=2, timing_budget_s=0.2, compile_baseline=False, timing_pool=2)


def test_single_evaluation_over_http(stack: LiveStack) -> None:
    ok = _case("l1/relu", "ok")
    with Client(stack.url) as client:
        view = client.evaluate(small_task(ok.task_id), ok.solution(), EvalOptions(**FAST), timeout=900)
    assert view.state == "done" and view.result is not None, view
    assert view.result.status == "ok" and view.reward is not None and view.reward >= 1


def test_batch_rewards_in_order_on_both_workers(stack: LiveStack) -> None:
    ok, wrong = _case("l1/relu", "ok"), _case("l1/relu", "incorrect")
    with Client(stack.url) as client:
        # The relu example at 1/80 of its size: the batch checks the service, not CPU arithmetic.
        small = ok.task().model_copy(update={"source": ok.task().source.replace("ROWS = 5120", "ROWS = 64")})
        assert small.source != ok.task().source
        task_id = client.register_task(small)
        reqs, expected = [], []
        for i in range(BATCH):
            case = ok if i % 2 == 0 else wrong
            opts = EvalOptions(**{**FAST, "timing_budget_s": 0.2 + i * 0.001})  # distinct evaluations
            reqs.append(EvaluationRequest(task_id=task_id, solution=case.solution(), options=opts))
            expected.append(case.expect)
        batch_id = client.submit_batch(reqs)
        deadline = time.monotonic() + 900
        view = client.batch(batch_id, wait=30)
        while view.done < view.total and time.monotonic() < deadline:
            view = client.batch(batch_id, wait=30)
        assert view.done == view.total == BATCH
        for item, exp in zip(view.items, expected, strict=True):
            got = item.reward if item.reward is not None else 0
            if (got < 1) if exp == "ok" else (item.reward != -1):
                result = client.get(item.id).result
                pytest.fail(f"{item} expected {exp}: {result.model_dump_json(indent=1) if result else None}")
        workers = {
            client.get(item.id).result.provenance.worker  # type: ignore[union-attr]
            for item in view.items
            if item.status == "ok"
        }
    assert {"cpu-a", "cpu-b"} <= workers, workers


def test_duplicate_is_served_from_cache_and_wait_returns_early(stack: LiveStack) -> None:
    ok = _case("l1/relu", "ok")
    opts = EvalOptions(**{**FAST, "trials": 3})
    with Client(stack.url) as client:
        first = client.submit(small_task(ok.task_id), ok.solution(), opts)
        started = time.monotonic()
        done = client.get(first.id, wait=120)
        assert done.state == "done" and time.monotonic() - started < 110
        again = client.submit(small_task(ok.task_id), ok.solution(), opts)
    assert again.id == first.id and again.deduplicated and again.state == "done"
    assert done.result is not None and done.result.compile is not None and done.result.compile.cached


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evalsvc.cli", *args], capture_output=True, text=True, timeout=1200
    )


def test_batch_commands_and_gate_through_the_service(stack: LiveStack, tmp_path: Path) -> None:
    ok, wrong = _case("l1/relu", "ok"), _case("l1/relu", "incorrect")
    small = small_task(ok.task_id)
    lines = [
        EvaluationRequest(task=small, solution=case.solution(), options=EvalOptions(**FAST)).model_dump_json()
        for case in (ok, wrong)
    ]
    (tmp_path / "requests.jsonl").write_text("\n".join(lines) + "\n")
    run = _cli("batch", "submit", str(tmp_path / "requests.jsonl"), "--url", stack.url, "--wait", "--json")
    assert run.returncode == 0, run.stderr
    view = json.loads(run.stdout)
    assert [item["status"] for item in view["items"]] == ["ok", "incorrect"]
    assert "2/2" in run.stderr  # the progress bar's last state
    shown = _cli("batch", "show", view["id"], "--url", stack.url)
    assert shown.returncode == 0 and "2 of 2 done" in shown.stdout

    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "task.py").write_text(small.source)
    for case in (ok, wrong):
        shutil.copy(case.solution_path, folder / case.solution_path.name)
    entries = [
        {"path": p.name, "device": "cpu", "expect": c.expect}
        for c, p in ((ok, ok.solution_path), (wrong, wrong.solution_path))
    ]
    (folder / "suite.json").write_text(
        json.dumps({"tasks": [{"id": "relu", "task": "task.py", "solutions": entries}]})
    )
    gate = _cli(
        "gate",
        str(folder / "suite.json"),
        "--url",
        stack.url,
        "--budget",
        "0.2",
        "--trials",
        "2",
        "--no-compile-baseline",
        "--junit",
        str(tmp_path / "j.xml"),
    )
    assert gate.returncode == 0, gate.stdout + gate.stderr
    assert "2 passed, 0 failed, 0 not judged" in gate.stdout
