"""A live stack for the RL adapters: redis-server, the uvicorn gateway, one Celery compile worker (Docker
sandbox) and one CPU-device worker; nothing faked. The same approach as tests/integration's end-to-end
stack, smaller: one device worker, one compile slot."""

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

from evalsvc.stack import redis_command
from tests.conftest import TEST_DATA

CLI = [sys.executable, "-m", "evalsvc.cli"]
DEVICE_WORKER = [*CLI, "worker", "gpu", "--device", "cpu", "--queue", "gpu.rl-cpu"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stack:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.redis_port = free_port()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.env = {
            **os.environ,
            "EVALSVC_REDIS_URL": f"redis://127.0.0.1:{self.redis_port}/0",
            "EVALSVC_DATA_DIR": str(TEST_DATA),
            "EVALSVC_COMPILE_BACKEND": "docker",
            "EVALSVC_COMPILE_TIMEOUT_S": "600",
            "EVALSVC_WORKER_NAME": "rl-cpu",
        }

    def spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.root / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it
        self.procs[name] = subprocess.Popen(
            argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def start(self) -> None:
        self.spawn("redis", redis_command(self.redis_port, self.root))
        self.spawn("gateway", [*CLI, "serve", "--port", str(self.port)])
        self.spawn("compile", [*CLI, "worker", "compile", "--concurrency", "1"])
        self.spawn("device", DEVICE_WORKER)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    pytest.fail(f"{name} exited: {self.log(name)}")
            try:
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        pytest.fail(f"stack not ready: {self.log('gateway')}")

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_bytes()[-4000:].decode(errors="replace")

    def stop_one(self, name: str) -> None:
        p = self.procs[name]
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    def stop(self) -> None:
        for name in list(self.procs):
            self.stop_one(name)


@pytest.fixture(scope="package")
def stack(cpu_settings) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
    root = Path(tempfile.mkdtemp(prefix="evalsvc-rl-"))
    s = Stack(root)
    try:
        s.start()
        yield s
    finally:
        s.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def stopped_device_worker(stack: Stack) -> Iterator[Stack]:
    """The stack with its only device worker stopped; started again afterwards."""
    stack.stop_one("device")
    try:
        yield stack
    finally:
        stack.spawn("device", DEVICE_WORKER)
