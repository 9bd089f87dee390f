"""One live stack for all reliability tests (bench.live_stack): real Redis with AOF, the uvicorn gateway,
a Celery compile worker on the Docker sandbox and a CPU-device worker, which the tests kill and restart."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bench.live_stack import LiveStack
from evalsvc.core.options import EvalOptions
from evalsvc.core.solutions import Solution
from evalsvc.core.tasks import TaskSpec
from evalsvc.suite import cases
from tests.conftest import TEST_DATA

# Short enough that a killed worker's job comes back within a test; longer than any evaluation here.
REDELIVERY_S = 8
MAX_ATTEMPTS = 2
FAST = dict(trials=2, timing_budget_s=0.1, compile_baseline=False, timing_pool=2)


def small_relu() -> tuple[TaskSpec, Solution]:
    """The bundled relu example at 1/80 of its size and its honest CPU solution (cached builds)."""
    ok = next(c for c in cases("cpu") if c.task_id == "l1/relu" and c.expect == "ok")
    task = ok.task()
    return task.model_copy(update={"source": task.source.replace("ROWS = 5120", "ROWS = 64")}), ok.solution()


def options(n: int, **over: object) -> dict:
    """Distinct evaluations of the same build: the options are part of the dedup key."""
    return EvalOptions(**{**FAST, "timing_budget_s": 0.1 + n * 1e-4, **over}).model_dump(mode="json")


@pytest.fixture(scope="session")
def stack(docker_ready: None) -> Iterator[LiveStack]:
    root = Path(tempfile.mkdtemp(prefix="evalsvc-rel-"))
    s = LiveStack(
        root,
        TEST_DATA,
        env={
            "EVALSVC_REDELIVERY_AFTER_S": str(REDELIVERY_S),
            "EVALSVC_MAX_ATTEMPTS": str(MAX_ATTEMPTS),
            "EVALSVC_RATE_LIMIT_PER_S": "0",
            # Jobs parked for want of a device worker wait this long before they fail: far longer than any
            # test needs, so that no test depends on how fast this machine runs the others
            "EVALSVC_ROUTE_WAIT_S": "600",
        },
    )
    try:
        s.start_all()
        yield s
    finally:
        s.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def task_id(stack: LiveStack) -> str:
    task, _ = small_relu()
    r = httpx.post(stack.url + "/v1/tasks", json=task.model_dump(mode="json"), timeout=10)
    assert r.status_code in (200, 201), r.text
    return r.json()["id"]


def submit(stack: LiveStack, task_id: str, n: int, key: str | None = None, **over: object) -> httpx.Response:
    _, sol = small_relu()
    body = {"task_id": task_id, "solution": sol.model_dump(mode="json"), "options": options(n, **over)}
    headers = {"Idempotency-Key": key} if key else {}
    return httpx.post(stack.url + "/v1/evaluations", json=body, headers=headers, timeout=30)


def wait_done(stack: LiveStack, job_id: str, timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            r = httpx.get(f"{stack.url}/v1/evaluations/{job_id}", params={"wait": 10}, timeout=30)
        except httpx.HTTPError:
            time.sleep(0.5)
            continue
        if r.status_code == 200 and r.json()["state"] == "done":
            return record(r.json())
        time.sleep(0.2)
    raise AssertionError(f"{job_id} not done after {timeout:.0f} s")


SEEN: dict[str, dict] = {}  # job id -> its result document when first seen done


def record(view: dict) -> dict:
    """Remember a finished job's result, to check at the end of the module that it never changed."""
    SEEN.setdefault(view["id"], view)
    return view


def assert_never_rewritten(stack: LiveStack) -> None:
    """Every result seen done is still the same document (same seeds, same write): nothing finished
    any job a second time, after at least one more redelivery period."""
    time.sleep(REDELIVERY_S + 2)
    for job_id, first in SEEN.items():
        r = httpx.get(f"{stack.url}/v1/evaluations/{job_id}", timeout=10)
        if r.status_code == 404:
            continue  # another module's stack
        now = r.json()
        assert now["updated_at"] == first["updated_at"], (job_id, first, now)
        assert now["result"] == first["result"], job_id
