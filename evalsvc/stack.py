"""`evalsvc up`: the whole stack on one machine as child processes (Redis, gateway, workers)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import httpx

from evalsvc.observability.prometheus_config import GATEWAY_JOB, WORKERS_JOB, scrape_config


def redis_command(port: int, directory: Path, fsync: str = "everysec", host: str = "127.0.0.1") -> list[str]:
    """A redis-server persisting to an append-only file in `directory` (no RDB snapshots)."""
    exe = shutil.which("redis-server")
    if exe is None:
        raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
    return [
        exe,
        *("--port", str(port), "--bind", host, "--dir", str(directory)),
        *("--appendonly", "yes", "--appendfsync", fsync, "--save", ""),
    ]


@dataclass
class Stack:
    data_dir: Path
    redis_url: str
    host: str = "127.0.0.1"
    port: int = 8000
    metrics_port: int = 9101  # the compile worker's exporter; device workers take the next ports
    prometheus_port: int = 9090
    scrape_interval_s: float = 5.0
    procs: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)
    scrape_targets: dict[str, list[str]] = field(default_factory=dict)

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        log = open(self.data_dir / "logs" / f"{name}.log", "ab")  # noqa: SIM115 - owned by the child
        proc = subprocess.Popen(
            argv, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs.append((name, proc))

    def start_redis(self) -> None:
        """Start a persistent (AOF) Redis unless one already answers at redis_url."""
        u = urlparse(self.redis_url)
        host, port = u.hostname or "127.0.0.1", u.port or 6379
        if _port_open(host, port):
            return
        rdir = self.data_dir / "redis"
        rdir.mkdir(parents=True, exist_ok=True)
        self._spawn("redis", redis_command(port, rdir, host=host), {})
        _wait_for(lambda: _port_open(host, port), 20, "redis")

    def start_services(self, gpus: list[str]) -> None:
        cli = [sys.executable, "-m", "evalsvc.cli"]
        common = {"EVALSVC_REDIS_URL": self.redis_url, "EVALSVC_DATA_DIR": str(self.data_dir)}
        gateway = {**common, **self._metrics_env("gateway", None)}
        self._spawn("gateway", [*cli, "serve", "--host", self.host, "--port", str(self.port)], gateway)
        compile_env = {**common, **self._metrics_env("compile", 0)}
        self._spawn("worker-compile", [*cli, "worker", "compile"], compile_env)
        if not gpus:
            env = {**common, **self._metrics_env("cpu", 1)}
            self._spawn("worker-cpu", [*cli, "worker", "gpu", "--device", "cpu"], env)
        for i, uuid in enumerate(gpus):
            env = {**common, **self._metrics_env(f"gpu{i}", 1 + i), "CUDA_VISIBLE_DEVICES": uuid}
            env["EVALSVC_GPU_UUID"] = uuid  # NVML ignores CUDA_VISIBLE_DEVICES: name the GPU
            self._spawn(
                f"worker-gpu{i}", [*cli, "worker", "gpu", "--device", "cuda:0", "--queue", f"gpu.{uuid}"], env
            )
        self.start_prometheus()

    def _metrics_env(self, group: str, port_offset: int | None) -> dict[str, str]:
        """A fresh multiprocess directory per process group and, for workers, an exporter port."""
        d = self.data_dir / "metrics" / group
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        env = {"PROMETHEUS_MULTIPROC_DIR": str(d)}
        if port_offset is None:
            self.scrape_targets.setdefault(GATEWAY_JOB, []).append(f"{self.host}:{self.port}")
        else:
            port = self.metrics_port + port_offset
            env["EVALSVC_METRICS_PORT"] = str(port)
            self.scrape_targets.setdefault(WORKERS_JOB, []).append(f"127.0.0.1:{port}")
        return env

    def start_prometheus(self) -> None:
        """Write the scrape configuration; run Prometheus on it when installed and its port is free."""
        config = self.data_dir / "prometheus.yml"
        config.write_text(scrape_config(self.scrape_targets, interval_s=self.scrape_interval_s))
        exe = shutil.which("prometheus")
        if exe is None or _port_open("127.0.0.1", self.prometheus_port):
            return
        self._spawn(
            "prometheus",
            [
                exe,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.data_dir / 'prometheus'}",
                f"--web.listen-address=127.0.0.1:{self.prometheus_port}",
            ],
            {},
        )

    def wait_ready(self, timeout: float = 300) -> None:
        url = f"http://{self.host}:{self.port}/readyz"

        def ready() -> bool:
            self.check_alive()
            try:
                return httpx.get(url, timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        _wait_for(ready, timeout, "the stack (/readyz)")

    def check_alive(self) -> None:
        for name, p in self.procs:
            if p.poll() is not None:
                tail = (self.data_dir / "logs" / f"{name}.log").read_bytes()[-3000:].decode(errors="replace")
                raise RuntimeError(f"{name} exited with code {p.returncode}:\n{tail}")

    def stop(self) -> None:
        for _, p in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for _, p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)


def visible_gpus() -> list[str]:
    """GPU UUIDs through NVML, without initialising CUDA in this process; [] without NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i))
            out.append(uuid.decode() if isinstance(uuid, bytes) else uuid)
        return out
    except Exception:
        return []


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def _wait_for(cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.3)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
