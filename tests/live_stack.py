"""A live stack for end-to-end tests: redis-server, the uvicorn gateway, a Celery compile worker (Docker
sandbox) and CPU-device workers, each its own process; nothing faked."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import httpx
import pytest

from evalsvc.stack import redis_command
from tests.conftest import TEST_DATA

CLI = [sys.executable, "-m", "evalsvc.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def device_worker(queue: str) -> list[str]:
    return [*CLI, "worker", "gpu", "--device", "cpu", "--queue", queue]


class LiveStack:
    def __init__(
        self,
        root: Path,
        device_workers: dict[str, str],
        compile_concurrency: int,
        redis_url: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """`device_workers`: worker name -> its queue. `redis_url`: a Redis (or Sentinel deployment) run
        by the caller; unset, the stack starts its own redis-server. `env`: more EVALSVC_* variables."""
        self.root = root
        self.device_workers = device_workers
        self.compile_concurrency = compile_concurrency
        self.redis_port = free_port()
        self.own_redis = redis_url is None
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.env = {
            **os.environ,
            "EVALSVC_REDIS_URL": redis_url or f"redis://127.0.0.1:{self.redis_port}/0",
            "EVALSVC_DATA_DIR": str(TEST_DATA),
            "EVALSVC_COMPILE_BACKEND": "docker",
            "EVALSVC_COMPILE_TIMEOUT_S": "600",
            **(env or {}),
        }

    def spawn(self, name: str, argv: list[str], **env: str) -> None:
        log = open(self.root / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it
        self.procs[name] = subprocess.Popen(
            argv, env={**self.env, **env}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def spawn_device_worker(self, name: str) -> None:
        self.spawn(name, device_worker(self.device_workers[name]), EVALSVC_WORKER_NAME=name)

    def start(self) -> None:
        if self.own_redis:
            self.spawn("redis", redis_command(self.redis_port, self.root))
        self.spawn("gateway", [*CLI, "serve", "--port", str(self.port)])
        self.spawn("compile", [*CLI, "worker", "compile", "--concurrency", str(self.compile_concurrency)])
        for name in self.device_workers:
            self.spawn_device_worker(name)
        self.wait_ready()

    def wait_ready(self) -> None:
        """Until the gateway answers ready (it checks Redis and a live worker); fails if a process exited."""
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
        self._wait(self._term(name))

    def stop(self) -> None:
        for p in [self._term(name) for name in list(self.procs)]:
            self._wait(p)

    def _term(self, name: str) -> subprocess.Popen[bytes]:
        p = self.procs[name]
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
        return p

    @staticmethod
    def _wait(p: subprocess.Popen[bytes]) -> None:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


@contextlib.contextmanager
def running_stack(
    prefix: str, device_workers: dict[str, str], compile_concurrency: int
) -> Iterator[LiveStack]:
    """A started stack in a fresh directory, stopped and removed afterwards (a module fixture's body)."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    stack = LiveStack(root, device_workers, compile_concurrency)
    try:
        stack.start()
        yield stack
    finally:
        stack.stop()
        shutil.rmtree(root, ignore_errors=True)
