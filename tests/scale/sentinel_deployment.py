"""A Redis Sentinel deployment on loopback for fault tests: one primary, one replica and three sentinels,
real redis-server / redis-sentinel processes on free ports in a temporary directory.

The primary is reached through `PrimaryRelay`, a TCP relay in this process whose replication stream the
test can hold: the primary keeps acknowledging writes while its replica receives none of them, which is
what asynchronous replication looks like at the moment a primary dies (here made long enough to act on).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import redis
import redis.sentinel

from evalsvc.stack import redis_command
from tests.live_stack import free_port

MASTER = "evalsvc"
DOWN_AFTER_MS = 1000  # a primary silent this long is down for a sentinel; two of three make it so
FAILOVER_TIMEOUT_MS = 10_000
# A held link stays up however long a busy machine makes the hold: a replica that dropped it would be in a
# new handshake at the kill, and the sentinels would promote nothing.
PATIENT_LINK = ("--repl-timeout", "3600")
# The primary sends its first full copy at once: Redis waits 5 s by default for more replicas to share it.
PROMPT_SYNC = ("--repl-diskless-sync-delay", "0")
PSYNC = b"\r\n$5\r\nPSYNC\r\n"  # a replica asking for the replication stream, as it sends it (RESP)


def wait_until(cond, timeout: float, what: str, interval: float = 0.1):  # type: ignore[no-untyped-def]
    """`cond()`'s first truthy value, polled until `timeout` (generous: this machine may be busy)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


class PrimaryRelay:
    """The primary's address as the sentinels (hence every client and the replica) know it: a relay to its
    real port. `hold()` stops passing the replication stream on, for good: what the primary sends its
    replica from then on is dropped (the replica, never told, takes its link for up), while clients and
    sentinels are served as before. `cut()` closes everything. The replica has to replicate through the
    monitored address: a sentinel reconfigures a replica of any other (`+fix-slave-config`)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.held = threading.Event()
        self.closed = threading.Event()
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, name="primary-relay", daemon=True).start()

    def hold(self) -> None:
        self.held.set()

    def cut(self) -> None:
        self.closed.set()
        for s in [self.listener, *self.sockets]:
            with contextlib.suppress(OSError):
                s.close()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                downstream, _ = self.listener.accept()
            except OSError:
                continue  # the relay was cut
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
            except OSError:
                downstream.close()  # the primary is gone: the client asks the sentinels again
                continue
            self.sockets += [downstream, upstream]
            replication = threading.Event()  # set once the connection asks for the replication stream
            for src, dst, to_client in ((upstream, downstream, True), (downstream, upstream, False)):
                args = (src, dst, to_client, replication)
                threading.Thread(target=self._pump, args=args, daemon=True).start()

    def _pump(
        self, src: socket.socket, dst: socket.socket, to_client: bool, replication: threading.Event
    ) -> None:
        try:
            src.settimeout(0.1)  # in the try: `cut()` may have closed it before this thread ran
            while not self.closed.is_set():
                try:
                    data = src.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    break
                if not to_client and PSYNC in data:
                    replication.set()
                if not (to_client and replication.is_set() and self.held.is_set()):  # checked after the read
                    dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.close()


class SentinelDeployment:
    """`start()` runs it; `url` is what EVALSVC_REDIS_URL is set to; `stop()` ends every process."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.primary_port, self.replica_port = free_port(), free_port()
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.relay: PrimaryRelay | None = None
        self.down_after_ms = DOWN_AFTER_MS

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        return f"sentinel://{hosts}/{MASTER}/0"

    def start(self) -> None:
        primary = redis_command(self.primary_port, self._dir("primary"), fsync="always")
        self._spawn("primary", [*primary, *PATIENT_LINK, *PROMPT_SYNC])
        wait_until(lambda: self._answers(self.primary_port), 30, "the primary")
        self.relay = PrimaryRelay(self.primary_port)
        replica = redis_command(self.replica_port, self._dir("replica"), fsync="always")
        self._spawn("replica", [*replica, *PATIENT_LINK, "--replicaof", "127.0.0.1", str(self.relay.port)])
        wait_until(self._replica_in_sync, 60, "the replica's first sync")
        for i, port in enumerate(self.sentinel_ports):
            self._spawn(f"sentinel-{i}", sentinel_command(self._sentinel_conf(i, port)))
        wait_until(self._sentinels_see_everyone, 60, "three sentinels that know the replica and each other")

    def stop(self) -> None:
        if self.relay is not None:
            self.relay.cut()
        for p in self.procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    def kill(self, name: str) -> None:
        """kill -9: no AOF flush, no goodbye to its replica or its clients."""
        p = self.procs[name]
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=30)

    def sentinel(self) -> redis.sentinel.Sentinel:
        return redis.sentinel.Sentinel(
            [("127.0.0.1", p) for p in self.sentinel_ports], socket_timeout=2, socket_connect_timeout=2
        )

    @property
    def relay_port(self) -> int:
        assert self.relay is not None, "not started"
        return self.relay.port

    def master_port(self) -> int:
        """The primary's port as the sentinels say it now."""
        return int(self.sentinel().discover_master(MASTER)[1])

    def node(self, port: int) -> redis.Redis:
        return redis.Redis(port=port, socket_timeout=5, socket_connect_timeout=5)

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_bytes()[-3000:].decode(errors="replace")

    def _dir(self, name: str) -> Path:
        d = self.root / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def _spawn(self, name: str, argv: list[str]) -> None:
        with open(self.root / f"{name}.log", "ab") as log:  # the child keeps its own copy
            self.procs[name] = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def _sentinel_conf(self, i: int, port: int) -> Path:
        """A sentinel rewrites its own file (what it learns of the others and of failovers): one each."""
        conf = self._dir(f"sentinel-{i}") / "sentinel.conf"
        conf.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {conf.parent}\n"
            f"sentinel monitor {MASTER} 127.0.0.1 {self.relay_port} 2\n"
            f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {MASTER} 1\n"
        )
        return conf

    def _answers(self, port: int) -> bool:
        try:
            return bool(self.node(port).ping())
        except redis.RedisError:
            return False

    def _replica_in_sync(self) -> bool:
        try:
            info = self.node(self.replica_port).info("replication")
        except redis.RedisError:
            return False
        return info.get("master_link_status") == "up" and not info.get("master_sync_in_progress")

    def _sentinels_see_everyone(self) -> bool:
        for port in self.sentinel_ports:
            try:
                state = self.node(port).sentinel_master(MASTER)
            except redis.RedisError:
                return False
            if int(state["num-slaves"]) < 1 or int(state["num-other-sentinels"]) < 2:
                return False
        return True


def sentinel_command(conf: Path) -> list[str]:
    """Debian's redis-sentinel (scripts/setup.sh installs it), else redis-server in sentinel mode."""
    exe = shutil.which("redis-sentinel")
    if exe is not None:
        return [exe, str(conf)]
    server = shutil.which("redis-server")
    if server is None:
        raise RuntimeError("neither redis-sentinel nor redis-server is installed (scripts/setup.sh)")
    return [server, str(conf), "--sentinel"]
