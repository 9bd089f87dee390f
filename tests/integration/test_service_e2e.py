"""The real stack end to end: redis-server, the uvicorn gateway, a Celery compile worker using the Docker
sandbox and two CPU-device workers on two queues. Nothing faked."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from evalsvc.core.options import EvalOptions
from evalsvc.sdk import Client
from evalsvc.service.records import EvaluationRequest
from evalsvc.stack import redis_command
from evalsvc.suite import cases
from tests.conftest import TEST_DATA
from tests.corpus.reader import small_task

pytestmark = pytest.mark.docker


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveStack:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.redis_port = _free_port()
        self.port = _free_port()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.env = {
            **os.environ,
            "EVALSVC_REDIS_URL": f"redis://127.0.0.1:{self.redis_port}/0",
            "EVALSVC_DATA_DIR": str(TEST_DATA),
            "EVALSVC_COMPILE_BACKEND": "docker",
            "EVALSVC_COMPILE_TIMEOUT_S": "600",
        }
        self.url = f"http://127.0.0.1:{self.port}"

    def spawn(self, name: str, argv: list[str], **env: str) -> None:
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - the child owns it
        self.procs[name] = subprocess.Popen(
            argv, env={**self.env, **env}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def start(self) -> None:
        self.spawn("redis", redis_command(self.redis_port, self.root))
        cli = [sys.executable, "-m", "evalsvc.cli"]
        self.spawn("gateway", [*cli, "serve", "--port", str(self.port)])
        self.spawn("compile", [*cli, "worker", "compile", "--concurrency", "2"])
        self.spawn(
            "cpu-a",
            [*cli, "worker", "gpu", "--device", "cpu", "--queue", "gpu.cpu-a"],
            EVALSVC_WORKER_NAME="cpu-a",
        )
        self.spawn(
            "cpu-b",
            [*cli, "worker", "gpu", "--device", "cpu", "--queue", "gpu.cpu-b"],
            EVALSVC_WORKER_NAME="cpu-b",
        )
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    pytest.fail(f"{name} exited: {self.log(name)}")
            try:
                r = httpx.get(self.url + "/readyz", timeout=2)
                if r.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        pytest.fail(f"stack not ready: {self.log('gateway')}")

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_bytes()[-4000:].decode(errors="replace")

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def stack(cpu_settings) -> Iterator[LiveStack]:  # type: ignore[no-untyped-def]
    root = Path(tempfile.mkdtemp(prefix="evalsvc-e2e-"))
    s = LiveStack(root)
    try:
        s.start()
        yield s
    finally:
        s.stop()
        shutil.rmtree(root, ignore_errors=True)


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
