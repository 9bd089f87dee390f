"""Roles apart: the gateway, two compile workers and two CPU-device workers as separate process trees, each
with a data directory of its own, talking only through Redis (broker, system of record, artifact store).
What one machine of a fleet sees of another's disk here is nothing; the precompiled headers, which a fleet
bakes into its compile image, are each compile worker's own hard-linked copy of the ones built once."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from evalsvc.core.options import EvalOptions
from evalsvc.records.documents import EvaluationRequest
from evalsvc.sdk import Client
from evalsvc.settings import Settings
from evalsvc.stack import redis_command
from evalsvc.suite import cases
from tests.live_stack import CLI, LiveStack, device_worker

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1500)]  # four cold compiles on a busy CPU

COMPILE_WORKERS = ("compile-1", "compile-2")
DEVICE_WORKERS = {"device-1": "gpu.device-1", "device-2": "gpu.device-2"}
FAST = dict(trials=2, timing_budget_s=0.2, compile_baseline=False, timing_pool=2)
VARIANTS = 1  # of each solution: two cold compiles, which can land on both compile workers


class RolesApart(LiveStack):
    """A LiveStack whose every process has its own EVALSVC_DATA_DIR and shares artifacts through Redis."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, DEVICE_WORKERS, compile_concurrency=1)
        self.env["EVALSVC_ARTIFACT_STORE"] = "redis"

    def data_dir(self, name: str) -> Path:
        d = self.root / "machines" / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def spawn_role(self, name: str, argv: list[str]) -> None:
        self.spawn(name, argv, EVALSVC_DATA_DIR=str(self.data_dir(name)), EVALSVC_WORKER_NAME=name)

    def spawn_device_worker(self, name: str) -> None:
        self.spawn_role(name, device_worker(self.device_workers[name]))

    def start_apart(self, pch: Path) -> None:
        self.spawn("redis", redis_command(self.redis_port, self.root))
        self.spawn_role("gateway", [*CLI, "serve", "--port", str(self.port)])
        for name in COMPILE_WORKERS:
            # cp -al: a tree of this worker's own (as if baked into its image), not 2 GB a copy
            subprocess.run(["cp", "-al", str(pch), str(self.data_dir(name) / "pch")], check=True)
            self.spawn_role(name, [*CLI, "worker", "compile", "--concurrency", "1"])
        for name in self.device_workers:
            self.spawn_device_worker(name)
        self.wait_ready()
        self.wait_for_workers(compile=2, gpu=2)

    def wait_for_workers(self, **want: int) -> None:
        deadline = time.monotonic() + 180
        seen: dict[str, int] = {}
        while time.monotonic() < deadline:
            seen = httpx.get(self.url + "/readyz", timeout=5).json().get("workers", {})
            if all(seen.get(kind, 0) >= n for kind, n in want.items()):
                return
            time.sleep(0.5)
        logs = "\n".join(f"--- {name}\n{self.log(name)[-1500:]}" for name in self.procs)
        pytest.fail(f"workers never all live: {seen}, want {want}\n{logs}")


@pytest.fixture(scope="module")
def apart(cpu_settings: Settings) -> Iterator[RolesApart]:
    from evalsvc.wiring import ensure_pch, make_sandbox

    sandbox, python = make_sandbox(cpu_settings)
    ensure_pch(sandbox, python, cpu_settings.pch_dir, cpu_settings.cuda_home)  # built once, like an image
    root = Path(tempfile.mkdtemp(prefix="evalsvc-apart-"))
    os.chmod(root, 0o755)
    stack = RolesApart(root)
    try:
        stack.start_apart(cpu_settings.pch_dir)
        yield stack
    finally:
        stack.stop()
        shutil.rmtree(root, ignore_errors=True)


def _variant(source: str, i: int) -> str:
    return f"{source}\n# variant {i}\n"


def _requests(client: Client) -> tuple[list[EvaluationRequest], list[str]]:
    ok = next(c for c in cases("cpu") if c.task_id == "l1/relu" and c.expect == "ok")
    wrong = next(c for c in cases("cpu") if c.task_id == "l1/relu" and c.expect == "incorrect")
    small = ok.task().model_copy(update={"source": ok.task().source.replace("ROWS = 5120", "ROWS = 64")})
    assert small.source != ok.task().source
    task_id = client.register_task(small)
    reqs, expected = [], []
    for i in range(2 * VARIANTS):
        case = ok if i % 2 == 0 else wrong
        solution = case.solution()
        files = {path: _variant(text, i // 2) for path, text in solution.files.items()}
        solution = solution.model_copy(update={"files": files})
        opts = EvalOptions(**{**FAST, "timing_budget_s": 0.2 + i * 0.001})  # distinct evaluations
        reqs.append(EvaluationRequest(task_id=task_id, solution=solution, options=opts))
        expected.append(case.expect)
    return reqs, expected


def _run_batch(client: Client, reqs: list[EvaluationRequest], expected: list[str]) -> dict[str, str]:
    """Submit, wait for every reward, check each; returns evaluation id -> the device worker that ran it."""
    batch_id = client.submit_batch(reqs)
    deadline = time.monotonic() + 900
    view = client.batch(batch_id, wait=30)
    while view.done < view.total and time.monotonic() < deadline:
        view = client.batch(batch_id, wait=30)
    assert view.done == view.total == len(reqs)
    ran_on = {}
    for item, exp in zip(view.items, expected, strict=True):
        result = client.get(item.id).result
        assert result is not None, item
        wrong_reward = (item.reward is None or item.reward < 1) if exp == "ok" else item.reward != -1
        assert not wrong_reward, f"{item} expected {exp}: {result.model_dump_json(indent=1)}"
        ran_on[item.id] = result.provenance.worker or ""
        print(f"{item.id} {result.status} on {ran_on[item.id]}: {result.duration_s:.1f} s")
    return ran_on


def test_a_batch_through_roles_that_share_no_disk(apart: RolesApart) -> None:
    """Device workers that never saw the task or an artifact (empty disks of their own) get both from
    Redis; no role keeps an artifact on its disk, and no device worker has the compile side's headers."""
    with Client(apart.url) as client:
        reqs, expected = _requests(client)
        ran_on = _run_batch(client, reqs, expected)
    assert set(ran_on.values()) <= set(DEVICE_WORKERS), ran_on
    for name in ("gateway", *COMPILE_WORKERS, *DEVICE_WORKERS):
        artifacts = apart.data_dir(name) / "artifacts"
        assert not artifacts.exists() or not any(artifacts.iterdir()), f"{name} kept artifacts on its disk"
    for name in DEVICE_WORKERS:
        assert not (apart.data_dir(name) / "pch").exists(), f"{name} has precompiled headers"
