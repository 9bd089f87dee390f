"""A whole local stack whose processes can be killed and restarted one by one (fault tests, the soak).

Redis (AOF, `appendfsync always`), the uvicorn gateway, a Celery compile worker on the Docker sandbox and
CPU-device workers, each a child process in its own session, started with this interpreter and
environment (so a worktree's PYTHONPATH reaches every one of them). Loopback only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import redis

from evalsvc.stack import redis_command

CLI = [sys.executable, "-m", "evalsvc.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(cond: Callable[[], bool], timeout: float, what: str, interval: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


@dataclass
class Proc:
    argv: list[str]
    env: dict[str, str]
    popen: subprocess.Popen[bytes] | None = None
    starts: int = 0


@dataclass
class LiveStack:
    """`root` holds logs and Redis' files; `data_dir` the artifacts and precompiled headers (shared
    between runs, so builds are cached)."""

    root: Path
    data_dir: Path
    cpu_workers: tuple[str, ...] = ("cpu-a",)
    compile_concurrency: int = 2
    env: dict[str, str] = field(default_factory=dict)
    redis_port: int = field(default_factory=free_port)
    http_port: int = field(default_factory=free_port)
    procs: dict[str, Proc] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "logs").mkdir(exist_ok=True)
        self.base_env = {
            **os.environ,
            "EVALSVC_REDIS_URL": self.redis_url,
            "EVALSVC_DATA_DIR": str(self.data_dir),
            "EVALSVC_COMPILE_BACKEND": "docker",
            "EVALSVC_COMPILE_TIMEOUT_S": "600",
            "EVALSVC_RUNNER_ISOLATION": "process" if os.geteuid() == 0 else "none",
            "EVALSVC_LOG_FORMAT": "text",
            **self.env,
        }
        self.procs["redis"] = Proc(redis_command(self.redis_port, self.root, fsync="always"), {})
        self.procs["gateway"] = Proc([*CLI, "serve", "--port", str(self.http_port)], {})
        self.procs["compile"] = Proc(
            [*CLI, "worker", "compile", "--concurrency", str(self.compile_concurrency)],
            {"EVALSVC_WORKER_NAME": "compile@reliability"},
        )
        for name in self.cpu_workers:
            self.procs[name] = Proc(
                [*CLI, "worker", "gpu", "--device", "cpu", "--queue", f"gpu.{name}"],
                {"EVALSVC_WORKER_NAME": name},
            )

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def redis(self) -> redis.Redis:
        return redis.Redis.from_url(self.redis_url, socket_timeout=5)

    # -- process control ----------------------------------------------------------------------------
    def start(self, name: str, **env: str) -> None:
        """Start (again); `env` changes this process's environment from now on ("" removes a name)."""
        proc = self.procs[name]
        proc.env.update(env)
        environ = {**self.base_env, **proc.env}
        environ = {k: v for k, v in environ.items() if v != ""}
        with open(self.root / "logs" / f"{name}.log", "ab") as log:  # the child keeps its own copy
            proc.popen = subprocess.Popen(
                proc.argv,
                env=environ,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        proc.starts += 1
        if name == "redis":
            wait_for(self._redis_answers, 30, "redis")

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Signal the process's whole session (a worker's pool children and runners too); wait for it."""
        popen = self.procs[name].popen
        if popen is None or popen.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, sig)
        try:
            popen.wait(timeout=120)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGKILL)
            popen.wait(timeout=30)

    def restart(self, name: str, sig: int = signal.SIGKILL, **env: str) -> None:
        self.kill(name, sig)
        self.start(name, **env)

    def alive(self, name: str) -> bool:
        popen = self.procs[name].popen
        return popen is not None and popen.poll() is None

    def start_all(self, timeout: float = 300) -> None:
        for name in self.procs:
            self.start(name)
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float = 300) -> None:
        def ready() -> bool:
            for name, proc in self.procs.items():
                if proc.popen is not None and proc.popen.poll() is not None:
                    raise RuntimeError(f"{name} exited ({proc.popen.returncode}):\n{self.log(name)}")
            try:
                return httpx.get(self.url + "/readyz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(ready, timeout, "the stack (/readyz)", interval=0.5)

    def wait_worker(self, name: str, timeout: float = 180) -> None:
        """Until the named device worker's heartbeat is fresh (it is consuming its queue)."""
        wait_for(lambda: self._heartbeat(name), timeout, f"worker {name}'s heartbeat", interval=0.5)

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            self.kill(name, signal.SIGTERM)

    def log(self, name: str, limit: int = 4000) -> str:
        path = self.root / "logs" / f"{name}.log"
        return path.read_bytes()[-limit:].decode(errors="replace") if path.exists() else ""

    def _redis_answers(self) -> bool:
        client = self.redis()
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()

    def _heartbeat(self, name: str) -> bool:
        popen = self.procs[name].popen
        client = self.redis()
        try:
            keys = list(client.scan_iter(f"evalsvc:worker:gpu.{name}:*"))
            mark = b'"pid":' + str(popen.pid if popen else -1).encode()
            return bool(keys) and all(mark in (client.get(k) or b"") for k in keys)
        except redis.RedisError:
            return False
        finally:
            client.close()
