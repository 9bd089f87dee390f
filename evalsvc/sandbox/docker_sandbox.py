"""Docker backend of `CompileSandbox`: one locked-down, throw-away container per command.

Why a container per run: the compiler runs over hostile sources, so each run gets a fresh root
filesystem (read-only), no network namespace interfaces but loopback, no capabilities, an
unprivileged uid, cgroup limits on memory (swap off), CPU and pids, rlimits on files, a private
executable tmpfs for scratch, and is removed afterwards whatever happened.

Confinement applied by the engine, not by us: Docker's default seccomp profile is used whenever
the engine reports `name=seccomp` in `docker info` (we never pass `seccomp=unconfined`). On the
development host (kernel 6.18, Docker 20.10, cgroup v1) the engine reports
`name=seccomp,profile=default` and containers show `Seccomp: 2` in /proc/self/status; AppArmor
and SELinux are absent there. Where the kernel has no seccomp, `check()` logs a warning and runs
go on without it.

Two image flavours share the same paths (python3 on PATH, package importable, scratch at
/scratch): the production image (docker/Dockerfile.compile, toolchain baked in, no mounts) and
the offline image built by docker/build-compile-image.sh, which is only valid together with
`host_toolchain_mounts()`. Bind-mount sources are paths on the engine's host, so the offline
flavour needs a local engine.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import docker.errors
import docker.types
import requests.exceptions
from docker.client import DockerClient
from docker.models.containers import Container

from evalsvc.sandbox.base import Mount, SandboxLimits, SandboxRun, SandboxUnavailable, current_job

log = logging.getLogger(__name__)

DEFAULT_IMAGE = "evalsvc-compile:local"
ROLE_LABEL = "evalsvc.role"
OWNER_LABEL = "evalsvc.owner"
OWNER_PROCESS_LABEL = "evalsvc.owner-process"  # the creator's process_identity(): pid, start time, boot
RUN_LABEL = "evalsvc.run"  # one per run(), unique
JOB_LABEL = "evalsvc.job"  # the job the run served, where the caller said (base.sandbox_job)
ROLE = "compile"
SANDBOX_USER = "65532:65532"
PACKAGE_MOUNT_POINT = "/opt/evalsvc/evalsvc"
BUILD_HINT = "run docker/ensure-docker.sh (or docker/build-compile-image.sh)"

# PATH comes from the image (it knows where its python3 and nvcc are); these complete it.
# EVALSVC_SCRATCH matches ProcessSandbox: the build entry point puts its work there.
DEFAULT_BASE_ENV: Mapping[str, str] = {
    "HOME": "/scratch",
    "TMPDIR": "/tmp",
    "EVALSVC_SCRATCH": "/scratch",
    "LANG": "C.UTF-8",
}

_DOCKER_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)
# The RUN_LABEL of every run() of this process from before its container is created until it is removed:
# a reap in this process (the heartbeat's, another sandbox object's) leaves those alone, and takes this
# process' other containers (one whose removal failed).
_RUNS_IN_FLIGHT: set[str] = set()
_RUNS_LOCK = threading.Lock()
_KILL_GRACE_S = 30.0
_OUTPUT_DRAIN_S = 10.0


def host_toolchain_mounts(
    *,
    python_prefixes: Sequence[Path] | None = None,
    cuda_home: Path = Path("/usr/local/cuda"),
    package_dir: Path | None = None,
) -> list[Mount]:
    """The read-only mounts that turn the offline image into a full toolchain on this host.

    /usr brings g++, ninja, coreutils and (usually) CUDA; the Python prefix (and a venv, if any)
    is mounted at its own path because torch's and pip's paths are absolute, and because the
    image creates that path's parents 0755 (on the host, /root is 0700); the evalsvc package is
    mounted at /opt/evalsvc/evalsvc, which the image puts on PYTHONPATH.
    """
    prefixes = python_prefixes or [Path(sys.base_prefix), Path(sys.prefix)]
    mounts = [Mount(Path("/usr"), "/usr")]
    for prefix in prefixes:
        _add_unless_covered(mounts, prefix, str(prefix))
    _add_unless_covered(mounts, cuda_home.resolve(), str(cuda_home))
    package = package_dir or Path(__file__).resolve().parents[1]
    mounts.append(Mount(package, PACKAGE_MOUNT_POINT))
    return mounts


def _add_unless_covered(mounts: list[Mount], host_path: Path, sandbox_path: str) -> None:
    """Append a same-path mount unless an existing mount already shows that path."""
    for m in mounts:
        if Path(sandbox_path).is_relative_to(m.sandbox_path) and host_path.is_relative_to(m.host_path):
            return
    mounts.append(Mount(host_path, sandbox_path))


class _HeadTail:
    """Keeps the first and last bytes of a stream under a fixed budget.

    Why both ends: a compiler's first error is at the head and its summary at the tail.
    """

    def __init__(self, limit: int) -> None:
        self._head_cap = limit // 2
        self._tail_cap = limit - self._head_cap
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk and self._tail_cap:
            self._tail += chunk
            if len(self._tail) > 2 * self._tail_cap:  # trim rarely, not on every chunk
                del self._tail[: -self._tail_cap]

    @property
    def truncated(self) -> bool:
        return self.total > self._head_cap + self._tail_cap

    def text(self) -> str:
        tail = bytes(self._tail[-self._tail_cap :]) if self._tail_cap else b""
        if not self.truncated:
            return (bytes(self._head) + tail).decode(errors="replace")
        omitted = self.total - len(self._head) - len(tail)
        marker = f"\n[evalsvc: {omitted} bytes of output omitted]\n".encode()
        return (bytes(self._head) + marker + tail).decode(errors="replace")


class _OutputPump(threading.Thread):
    """Drains an attached container's stdout+stderr into a `_HeadTail` while the main thread waits.

    Why attach rather than read the logs at the end: the log driver rotates at `max-size` (which
    bounds the engine's disk use) and would lose the head of a long output; following the log
    file is also several times slower than the attach stream.
    """

    def __init__(self, stream: Any, sink: _HeadTail, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self._stream = stream
        self._sink = sink
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for chunk in self._stream:
                self._sink.feed(chunk)
        except BaseException as exc:  # reported by the caller; a thread must not raise
            self.error = exc

    def close(self) -> None:
        """Close the stream; a pump still blocked on it ends when the container is removed."""
        try:
            self._stream.close()
        except Exception:  # closing a dead socket is best effort
            log.debug("closing the output stream failed", exc_info=True)


class DockerSandbox:
    """Runs each command in a fresh container of the compile image, then removes it.

    `owner` must identify this worker stably across restarts (e.g. its Celery node name): it is
    written as a label on every container, with the creating process (pid, start time and the host's
    boot) and the job, so that `reap_leftovers()` can remove what dead processes of the same worker left
    while sibling processes (a prefork pool's children share the owner) keep their running containers.
    The Docker client is created on first use, so constructing a sandbox does no I/O.
    """

    name = "docker"

    def __init__(
        self,
        *,
        owner: str,
        image: str = DEFAULT_IMAGE,
        toolchain_mounts: Sequence[Mount] = (),
        base_url: str | None = None,
        tmpfs_bytes: int = 2 * 1024**3,
        base_env: Mapping[str, str] = DEFAULT_BASE_ENV,
        working_dir: str = "/scratch",
        use_init: bool = True,
    ) -> None:
        self.owner = owner
        self.image = image
        self.toolchain_mounts = tuple(toolchain_mounts)
        self.base_url = base_url
        self.tmpfs_bytes = tmpfs_bytes
        self.base_env = dict(base_env)
        self.working_dir = working_dir
        self.use_init = use_init
        self.engine_seccomp: bool | None = None  # known after check()
        self._client: DockerClient | None = None

    # -- public interface -------------------------------------------------------------------

    def check(self) -> None:
        """Ping the engine, inspect the image and the toolchain mounts; log the confinement."""
        client = self._docker()
        with self._errors("pinging the engine"):
            client.ping()
            info = client.info()
        self._check_engine_features(info)
        with self._errors(f"inspecting image {self.image}"):
            client.images.get(self.image)
        missing = [str(m.host_path) for m in self.toolchain_mounts if not m.host_path.exists()]
        if missing:
            raise SandboxUnavailable(f"toolchain mount sources missing on this host: {missing}")

    def ping(self) -> None:
        """The cheap part of `check()`, for health probes: the engine answers and has the image."""
        client = self._docker()
        with self._errors("pinging the engine"):
            client.ping()
        with self._errors(f"inspecting image {self.image}"):
            client.images.get(self.image)

    def run(
        self, argv: list[str], mounts: list[Mount], limits: SandboxLimits, env: dict[str, str]
    ) -> SandboxRun:
        """Run `argv` in a new container; always remove it. Candidate failures are results."""
        if not argv:
            raise ValueError("argv must not be empty")
        spec = self._container_spec(argv, mounts, limits, env)
        run_id = spec["labels"][RUN_LABEL]
        with _RUNS_LOCK:
            _RUNS_IN_FLIGHT.add(run_id)
        try:
            with self._errors("creating the container"):
                container = self._docker().containers.create(**spec)
            try:
                return self._execute(container, limits)
            finally:
                self._remove(container)
        finally:
            with _RUNS_LOCK:
                _RUNS_IN_FLIGHT.discard(run_id)

    def reap_leftovers(self) -> list[str]:
        """Remove this owner's leftover containers; returns their ids. A leftover is one whose creating
        process is gone (a dead pool child, an earlier boot of the host; a container without the label),
        or one of this process' own that no run() of it is using.

        Safe at any time in any process of the worker: a sibling's container (another child of the same
        pool, the same owner) is left alone while the sibling lives, whether its run is going or not.
        """
        labels: list[str] = [f"{ROLE_LABEL}={ROLE}", f"{OWNER_LABEL}={self.owner}"]
        filters: dict[str, str | list[str] | bool] = {"label": labels}
        with self._errors("listing leftover containers"):
            # A sibling may remove its container between the listing and the inspection of each found:
            # skip it (a 404 here failed a compile job as "sandbox unavailable", 1 run in ~20 of
            # test_redis_restart_during_a_batch).
            found = self._docker().containers.list(all=True, filters=filters, ignore_removed=True)
        me = process_identity(os.getpid())
        with _RUNS_LOCK:
            in_flight = set(_RUNS_IN_FLIGHT)

        def leftover(container: Container) -> bool:
            creator = container.labels.get(OWNER_PROCESS_LABEL, "")
            if creator == me:
                return container.labels.get(RUN_LABEL) not in in_flight
            return not process_alive(creator)

        leftovers = [c for c in found if leftover(c)]
        for container in leftovers:
            log.warning("removing leftover compile container %s", container.short_id)
            self._remove(container)
        return [str(c.id) for c in leftovers]

    def close(self) -> None:
        """Close the Docker client's connection pool."""
        client, self._client = self._client, None
        if client is not None:
            client.close()

    # -- container lifecycle ----------------------------------------------------------------

    def _execute(self, container: Container, limits: SandboxLimits) -> SandboxRun:
        """Start, wait with the wall limit, kill on timeout, collect state and capped output."""
        sink = _HeadTail(limits.output_bytes)
        with self._errors("attaching to the container"):
            # Attached before start, so that no early output is missed.
            stream = container.attach(stdout=True, stderr=True, stream=True, logs=False)
        pump = _OutputPump(stream, sink, name=f"evalsvc-output-{container.short_id}")
        pump.start()
        try:
            with self._errors("starting the container"):
                container.start()
            started = time.monotonic()
            exit_code = self._wait(container, limits.wall_seconds)
            duration = time.monotonic() - started
            if exit_code is None:
                self._kill(container)
            pump.join(_OUTPUT_DRAIN_S)
        finally:
            pump.close()
        with self._errors("inspecting the finished container"):
            container.reload()
        if pump.error is not None:
            log.warning("output stream of %s ended early: %r", container.short_id, pump.error)
        return SandboxRun(
            exit_code=exit_code,
            output=sink.text(),
            timed_out=exit_code is None,
            oom_killed=bool(container.attrs.get("State", {}).get("OOMKilled")),
            duration_s=duration,
            output_truncated=sink.truncated,
            extra={"container": container.short_id, "output_bytes_total": str(sink.total)},
        )

    def _wait(self, container: Container, wall_seconds: float) -> int | None:
        """The exit status, or None if the wall limit passed first."""
        deadline = time.monotonic() + wall_seconds
        try:
            result = container.wait(timeout=max(wall_seconds, 0.001))
        except requests.exceptions.RequestException:
            if time.monotonic() >= deadline - 0.05:
                return None
            raise SandboxUnavailable("lost the Docker engine while waiting for the container") from None
        except docker.errors.DockerException as exc:
            raise SandboxUnavailable(f"Docker error while waiting for the container: {exc}") from exc
        return int(result.get("StatusCode", -1))

    def _kill(self, container: Container) -> None:
        """SIGKILL the container (all its processes die with its pid namespace) and reap it."""
        try:
            container.kill()
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: it exited on its own meanwhile
                raise SandboxUnavailable(f"could not kill container {container.short_id}: {exc}") from exc
        with self._errors("waiting for the killed container"):
            container.wait(timeout=_KILL_GRACE_S)

    def _remove(self, container: Container) -> None:
        """Force-remove; a failure is logged, and `reap_leftovers()` gets it later."""
        try:
            container.remove(force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: another process of this worker is removing it already
                log.exception("could not remove compile container %s", container.short_id)
        except _DOCKER_ERRORS:
            log.exception("could not remove compile container %s", container.short_id)

    # -- container spec ---------------------------------------------------------------------

    def _container_spec(
        self, argv: list[str], mounts: list[Mount], limits: SandboxLimits, env: dict[str, str]
    ) -> dict[str, Any]:
        """Keyword arguments of `containers.create`: every confinement knob in one place."""
        log_cap = max(4 * limits.output_bytes, 1024**2)
        return {
            "image": self.image,
            "command": list(argv),
            "user": SANDBOX_USER,
            "working_dir": self.working_dir,
            "environment": {**self.base_env, **env},
            "labels": {
                ROLE_LABEL: ROLE,
                OWNER_LABEL: self.owner,
                OWNER_PROCESS_LABEL: process_identity(os.getpid()),
                RUN_LABEL: uuid.uuid4().hex,
                **({JOB_LABEL: job} if (job := current_job()) else {}),
            },
            "hostname": "sandbox",
            "network_mode": "none",
            "read_only": True,
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "init": self.use_init,
            "ipc_mode": "private",
            "mem_limit": limits.memory_bytes,
            "memswap_limit": limits.memory_bytes,
            "oom_score_adj": 1000,
            "nano_cpus": int(limits.cpus * 1e9),
            "pids_limit": limits.pids,
            "ulimits": [
                docker.types.Ulimit(name="nofile", soft=limits.nofile, hard=limits.nofile),
                docker.types.Ulimit(name="fsize", soft=limits.fsize_bytes, hard=limits.fsize_bytes),
                docker.types.Ulimit(name="core", soft=0, hard=0),
            ],
            "tmpfs": {path: self._tmpfs_options() for path in ("/scratch", "/tmp")},
            "mounts": [_docker_mount(m) for m in (*self.toolchain_mounts, *mounts)],
            "log_config": docker.types.LogConfig(
                type="json-file", config={"max-size": str(log_cap), "max-file": "2"}
            ),
        }

    def _tmpfs_options(self) -> str:
        uid, gid = SANDBOX_USER.split(":")
        return f"rw,exec,nosuid,nodev,size={self.tmpfs_bytes},uid={uid},gid={gid},mode=1777"

    # -- engine access ----------------------------------------------------------------------

    def _docker(self) -> DockerClient:
        """The client, created on first use (the SDK talks to the engine when it is built)."""
        if self._client is None:
            with self._errors("connecting to the engine"):
                if self.base_url is None:
                    self._client = DockerClient.from_env()
                else:
                    self._client = DockerClient(base_url=self.base_url)
        return self._client

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """Translate Docker SDK and transport errors into `SandboxUnavailable`, here only."""
        try:
            yield
        except docker.errors.ImageNotFound as exc:
            raise SandboxUnavailable(f"compile image {self.image} not found: {BUILD_HINT}") from exc
        except _DOCKER_ERRORS as exc:
            raise SandboxUnavailable(f"Docker error while {action}: {exc} ({BUILD_HINT})") from exc

    def _check_engine_features(self, info: Mapping[str, Any]) -> None:
        """Refuse an engine that cannot enforce our limits; warn where it lacks seccomp."""
        lacking = [k for k in ("MemoryLimit", "PidsLimit", "CpuCfsQuota") if not info.get(k)]
        if lacking:
            raise SandboxUnavailable(f"Docker engine cannot enforce {lacking}; refusing to run jobs")
        if not info.get("SwapLimit"):
            log.warning("Docker engine has no swap accounting: memswap_limit is ignored")
        options = [str(o) for o in info.get("SecurityOptions") or []]
        self.engine_seccomp = any(o.startswith("name=seccomp") for o in options) and not any(
            "profile=unconfined" in o for o in options
        )
        if self.engine_seccomp:
            log.info("Docker sandbox confinement: %s", ", ".join(options))
        else:
            log.warning(
                "Docker engine applies no seccomp profile (kernel without seccomp?): compile "
                "containers run without syscall filtering; security options: %s",
                options or "none",
            )


def process_identity(pid: int) -> str:
    """`<pid>:<start time>@<boot id>`: names one process of this host even after its pid is reused, or
    the host rebooted (a worker started at boot can get the same pid and start time again) ("" when it is
    gone). Start time is in clock ticks since boot, so only the boot id tells two boots apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # Field 22 (starttime) counted after the command name, which is in parentheses and may hold spaces.
    return f"{pid}:{stat.rsplit(')', 1)[1].split()[19]}@{_boot_id()}"


def process_alive(identity: str) -> bool:
    """Whether the process a label names still runs (a missing or malformed label, or one written in an
    earlier boot: no). A label of the older `<pid>:<start time>` form, without the boot, is compared as
    such: a container of a sibling that an older version started is not a leftover while it lives."""
    pid, _, _ = identity.partition(":")
    if not pid.isdigit():
        return False
    current = process_identity(int(pid))
    return current == identity if "@" in identity else current.partition("@")[0] == identity


@cache
def _boot_id() -> str:
    """This boot of the host's kernel (the same inside a container)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def _docker_mount(m: Mount) -> docker.types.Mount:
    """Our `Mount` as a Docker bind mount; relative targets are a caller bug."""
    if not m.sandbox_path.startswith("/"):
        raise ValueError(f"sandbox path must be absolute: {m.sandbox_path!r}")
    return docker.types.Mount(
        target=m.sandbox_path, source=str(m.host_path), type="bind", read_only=m.read_only
    )
