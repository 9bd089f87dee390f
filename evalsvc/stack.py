"""`evalsvc up`: the whole stack on one machine as supervised child processes (Redis, gateway, workers).

Each child gets the environment it was started with, less every secret, and its own secrets as files
(`EVALSVC_SECRETS_DIR`): the gateway the API keys and the Redis URL, the workers only the Redis URL. A
child that exits after the stack was ready is started again, with backoff.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import httpx

from evalsvc.observability.prometheus_config import GATEWAY_JOB, WORKERS_JOB, rule_files, scrape_config
from evalsvc.settings import SECRETS_DIR_VARIABLE, parse_sentinel_url

log = logging.getLogger("evalsvc.stack")

# Variables that hold a secret in some deployment: never inherited by a child, whatever the name's prefix.
CREDENTIAL_MARKS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
SECRET_VARIABLES = ("EVALSVC_API_KEYS", "EVALSVC_REDIS_URL", SECRETS_DIR_VARIABLE)
RESTART_BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
STABLE_AFTER_S = 60.0  # a child up this long has its backoff reset


def child_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The starting environment less every secret; secrets reach a child only as files."""
    return {
        k: v
        for k, v in environ.items()
        if k not in SECRET_VARIABLES and not any(mark in k.upper() for mark in CREDENTIAL_MARKS)
    }


def write_secrets(directory: Path, secrets: Mapping[str, str]) -> Path:
    """One file per secret, readable by this user only, named as pydantic-settings expects."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    for stale in directory.iterdir():
        stale.unlink()
    for name, value in secrets.items():
        fd = os.open(directory / name.lower(), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(value)
    return directory


def redis_command(
    port: int, directory: Path, fsync: str = "everysec", host: str = "127.0.0.1", password: str | None = None
) -> list[str]:
    """A redis-server persisting to an append-only file in `directory` (no RDB snapshots). A password goes
    into a configuration file readable by this user only, not onto the command line (which anyone on the
    host can read in /proc)."""
    exe = shutil.which("redis-server")
    if exe is None:
        raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
    argv = [exe]
    if password:
        conf = directory / "evalsvc-redis.conf"
        fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f'requirepass "{password}"\n')
        argv.append(str(conf))
    return [
        *argv,
        *("--port", str(port), "--bind", host, "--dir", str(directory)),
        *("--appendonly", "yes", "--appendfsync", fsync, "--save", ""),
    ]


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str]
    proc: subprocess.Popen[bytes]
    started: float
    restarts: int = 0
    down_since: float | None = None  # when it was found exited; it starts again after its backoff


@dataclass
class Stack:
    data_dir: Path
    redis_url: str
    host: str = "127.0.0.1"
    port: int = 8000
    metrics_port: int = 9101  # the compile worker's exporter; device workers take the next ports
    prometheus_port: int = 9090
    scrape_interval_s: float = 5.0
    api_keys: Mapping[str, str] = field(default_factory=dict)
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    children: list[Child] = field(default_factory=list)
    scrape_targets: dict[str, list[str]] = field(default_factory=dict)

    @property
    def procs(self) -> list[tuple[str, subprocess.Popen[bytes]]]:
        return [(c.name, c.proc) for c in self.children]

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        full_env = {**child_environment(self.environ), **env}
        self.children.append(Child(name, argv, full_env, self._popen(name, argv, full_env), time.monotonic()))

    def _popen(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        with open(self.data_dir / "logs" / f"{name}.log", "ab") as out:  # the child keeps its own copy
            return subprocess.Popen(
                argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def _secrets_env(self, role: str) -> dict[str, str]:
        """The variable naming `role`'s secrets directory: the gateway gets the API keys, no worker does."""
        secrets = {"EVALSVC_REDIS_URL": self.redis_url}
        if role == "gateway" and self.api_keys:
            secrets["EVALSVC_API_KEYS"] = json.dumps(dict(self.api_keys))
        directory = write_secrets(self.data_dir / "secrets" / role, secrets)
        return {SECRETS_DIR_VARIABLE: str(directory)}

    def start_redis(self, reuse_foreign: bool = False) -> None:
        """Start a persistent (AOF) Redis in data_dir/redis. One already answering at redis_url is used when
        it is that Redis (an `up` before this one left it running), or with `reuse_foreign`; else refused,
        since the stack would keep its jobs in somebody else's database. A Sentinel URL names a deployment
        run elsewhere (docs/operations.md): nothing is started."""
        if urlparse(self.redis_url).scheme == "sentinel":
            log.info("Redis through Sentinel (%s): the stack starts none", sentinel_hosts(self.redis_url))
            return
        u = urlparse(self.redis_url)
        host, port = u.hostname or "127.0.0.1", u.port or 6379
        rdir = self.data_dir / "redis"
        if _port_open(host, port):
            owner = _redis_dir(self.redis_url)
            if owner == str(rdir.resolve()):
                log.warning(
                    "using the Redis already running at %s:%d (this data dir's, %s)", host, port, owner
                )
                return
            if not reuse_foreign:
                raise RuntimeError(
                    f"a Redis that is not this stack's answers at {host}:{port} (dir: {owner or 'unknown'}); "
                    "give --redis-url another port, or --use-running-redis to keep jobs in it"
                )
            log.warning(
                "using the Redis at %s:%d that is not this stack's (dir %s), as asked", host, port, owner
            )
            return
        rdir.mkdir(parents=True, exist_ok=True)
        self._spawn("redis", redis_command(port, rdir, host=host, password=u.password), {})
        _wait_for(lambda: _port_open(host, port), 20, "redis")

    def start_services(self, gpus: list[str]) -> None:
        cli = [sys.executable, "-m", "evalsvc.cli"]
        common = {"EVALSVC_DATA_DIR": str(self.data_dir)}
        workers = {**common, **self._secrets_env("worker")}
        gateway = {**common, **self._secrets_env("gateway"), **self._metrics_env("gateway", None)}
        self._spawn("gateway", [*cli, "serve", "--host", self.host, "--port", str(self.port)], gateway)
        compile_env = {**workers, **self._metrics_env("compile", 0)}
        self._spawn("worker-compile", [*cli, "worker", "compile"], compile_env)
        if not gpus:
            env = {**workers, **self._metrics_env("cpu", 1)}
            self._spawn("worker-cpu", [*cli, "worker", "gpu", "--device", "cpu"], env)
        for i, uuid in enumerate(gpus):
            env = {**workers, **self._metrics_env(f"gpu{i}", 1 + i), "CUDA_VISIBLE_DEVICES": uuid}
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
        """Write the scrape configuration (with the checkout's alert rules); run Prometheus on it when
        installed and its port is free."""
        config = self.data_dir / "prometheus.yml"
        config.write_text(scrape_config(self.scrape_targets, self.scrape_interval_s, rule_files()))
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
        """While the stack starts, a child that exits is an error worth stopping for (a port in use, a
        missing package): its log tail says why."""
        for c in self.children:
            if c.proc.poll() is not None:
                raise RuntimeError(f"{c.name} exited with code {c.proc.returncode}:\n{self.log_tail(c.name)}")

    def supervise(self) -> None:
        """Once the stack runs: start again, after its backoff, every child that exited (Redis on the same
        AOF directory). One pass; `evalsvc up` calls it every few seconds."""
        now = time.monotonic()
        for c in self.children:
            if c.down_since is None:
                if c.proc.poll() is None:
                    if now - c.started > STABLE_AFTER_S:
                        c.restarts = 0
                    continue
                c.down_since = now
                delay = RESTART_BACKOFF_S[min(c.restarts, len(RESTART_BACKOFF_S) - 1)]
                log.warning(
                    "%s exited with code %s; starting it again in %.0f s (restart %d); last output:\n%s",
                    c.name, c.proc.returncode, delay, c.restarts + 1, self.log_tail(c.name, 800),
                )  # fmt: skip
            delay = RESTART_BACKOFF_S[min(c.restarts, len(RESTART_BACKOFF_S) - 1)]
            if now - c.down_since >= delay:
                c.proc = self._popen(c.name, c.argv, c.env)
                c.started, c.down_since, c.restarts = now, None, c.restarts + 1
                log.warning("%s started again (pid %d)", c.name, c.proc.pid)

    def log_tail(self, name: str, limit: int = 3000) -> str:
        return (self.data_dir / "logs" / f"{name}.log").read_bytes()[-limit:].decode(errors="replace")

    def stop(self) -> None:
        for c in reversed(self.children):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(c.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for c in self.children:
            try:
                c.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(c.proc.pid, signal.SIGKILL)


def sentinel_hosts(url: str) -> str:
    """The sentinels and master a Sentinel URL names, without its password (for a log line)."""
    target = parse_sentinel_url(url)
    return ",".join(f"{h}:{p}" for h, p in target.sentinels) + f" master {target.master}"


def _redis_dir(url: str) -> str | None:
    """The data directory of the Redis at `url` (CONFIG GET dir), None when it will not say."""
    import redis

    try:
        with redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2) as client:
            found = client.config_get("dir").get("dir")
    except redis.RedisError:
        return None
    return found.decode() if isinstance(found, bytes) else found


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


def _wait_for(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.3)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
