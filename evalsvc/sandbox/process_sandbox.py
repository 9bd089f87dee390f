"""Compile sandbox as a local process: rlimits, a scrubbed environment, an unprivileged uid when root.

For GPU hosts without a Docker engine, and for development. Weaker than Docker (no filesystem view of
its own); mounts are not remapped, so sandbox paths in argv/env are rewritten to the host paths.

Nothing of a build outlives its run, however it ends (exit, wall limit, an error of ours). A process group
is not enough: ninja starts each command in a group of its own, and a killed build's `sh -> nvcc -> sh ->
cicc` ran on for minutes as orphans in a deleted scratch directory. As root, each build runs under a uid of
its own (`COMPILE_UIDS` of them, each held host-wide through a lock file from before the build until its
processes are gone), and afterwards every process of that uid is killed with one kill(-1), whatever process
groups, sessions or double forks the build made (`kill_uid_tree`). Without root (development only: the
build then runs as the worker's own uid, no boundary at all) the build's processes are found by a token in
their environment, which the compilers pass on but a hostile build could drop.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import random
import resource
import signal
import stat
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from evalsvc.sandbox.base import Mount, SandboxLimits, SandboxRun, SandboxUnavailable
from evalsvc.sandbox.isolation import (
    COMPILE_KILLER_UID_BASE,
    COMPILE_UID_BASE,
    COMPILE_UIDS,
    drop_privileges,
    unshare_network,
)

log = logging.getLogger(__name__)

RUN_TOKEN_VAR = "EVALSVC_SANDBOX_RUN"  # without root: how the build's processes are found
UID_WAIT_S = 300.0  # how long a build waits for one of the host's compile uids before giving up
KILL_WAIT_S = 30.0  # how long to wait for killed processes to be gone (one stuck in the kernel: logged)


class ProcessSandbox:
    name = "process"

    def __init__(self, isolate: bool = True, uids: BuildUids | None = None) -> None:
        self.isolate = isolate and os.geteuid() == 0
        self.uids = uids or BuildUids()

    def check(self) -> None:
        if not Path("/proc/self").exists():
            raise SandboxUnavailable("process sandbox needs Linux /proc")

    def run(
        self, argv: list[str], mounts: list[Mount], limits: SandboxLimits, env: dict[str, str]
    ) -> SandboxRun:
        mapping = {m.sandbox_path: str(m.host_path) for m in mounts}

        def remap(value: str) -> str:
            for inner, outer in sorted(mapping.items(), key=lambda kv: -len(kv[0])):
                if value == inner or value.startswith(inner + "/"):
                    return outer + value[len(inner) :]
            return value

        # Exit order: the scratch is removed after the build's processes are gone (in _spawn), and the uid
        # goes back to the host after that.
        with self._build_uid() as uid, tempfile.TemporaryDirectory(prefix="evalsvc-sbx-") as scratch:
            if uid is not None:
                os.chown(scratch, uid, uid)
                for m in mounts:
                    if not m.read_only:  # handed to this build's uid, with what earlier builds left in it
                        _chown_tree(m.host_path, uid)
            full_env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": scratch,
                "TMPDIR": scratch,
                "EVALSVC_SCRATCH": scratch,
                "LANG": "C.UTF-8",
                # The build uid has no passwd entry: getpass.getuser() (torch._dynamo at import) reads these.
                "USER": "evalsvc-build",
                "LOGNAME": "evalsvc-build",
                **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}),
                **({"CUDA_HOME": os.environ["CUDA_HOME"]} if "CUDA_HOME" in os.environ else {}),
                **{k: remap(v) for k, v in env.items()},
            }
            token = None
            if uid is None:
                token = uuid.uuid4().hex
                full_env[RUN_TOKEN_VAR] = token
            return self._spawn([remap(a) for a in argv], full_env, scratch, limits, uid, token)

    @contextlib.contextmanager
    def _build_uid(self) -> Iterator[int | None]:
        """A compile uid no other build on this host has, with nothing running under it (None without
        root)."""
        if not self.isolate:
            yield None
            return
        with self.uids.held() as uid:
            kill_uid_tree(uid)  # what a worker killed mid-build left under it
            yield uid  # the build's processes are killed as it ends (_spawn), before the scratch goes

    def _spawn(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: str,
        limits: SandboxLimits,
        uid: int | None,
        token: str | None,
    ) -> SandboxRun:
        def preexec() -> None:
            os.setsid()
            for res, value in (
                (resource.RLIMIT_CORE, 0),
                (resource.RLIMIT_FSIZE, limits.fsize_bytes),
                (resource.RLIMIT_NOFILE, limits.nofile),
                (resource.RLIMIT_DATA, limits.memory_bytes),
                (resource.RLIMIT_CPU, int(limits.wall_seconds * max(limits.cpus, 1)) + 5),
            ):
                resource.setrlimit(res, (value, value))
            if uid is not None:
                # Counted per uid: the build's uid is its own, so this is the build's budget (Docker's
                # pids limit), and a fork bomb stops there.
                resource.setrlimit(resource.RLIMIT_NPROC, (limits.pids, limits.pids))
                unshare_network()
                drop_privileges(uid)

        start = time.monotonic()
        out_path = Path(cwd) / ".evalsvc-output"
        with open(out_path, "w+b") as sink:
            proc = subprocess.Popen(
                argv,
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=cwd,
                preexec_fn=preexec,
                close_fds=True,
            )
            timed_out = False
            try:
                proc.wait(timeout=limits.wall_seconds)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:  # however the wait ended: the whole tree, not only the build's process group
                if proc.returncode is None:  # not reaped yet, so its group id cannot name anyone else's
                    _kill_group(proc.pid)
                    proc.wait()
                leftovers = kill_uid_tree(uid) if uid is not None else kill_by_token(token or "")
            if leftovers:
                log.info("killed %d process(es) the build left (timed out: %s)", leftovers, timed_out)
            sink.seek(0, os.SEEK_END)
            size = sink.tell()
            output, truncated = _read_capped(sink, size, limits.output_bytes)
        code = None if timed_out else proc.returncode
        oom = code is not None and code < 0 and -code == signal.SIGKILL and not timed_out
        extra = {"leftover_processes": str(leftovers), **({"uid": str(uid)} if uid is not None else {})}
        return SandboxRun(code, output, timed_out, oom, time.monotonic() - start, truncated, extra)


class BuildUids:
    """Host-wide ownership of the compile uids: an exclusive flock on one root-only file per uid, held
    while a build may run under it; the kernel drops it if the holder dies. Two workers (or prefork
    children, or a worker and a CLI) on one host never run builds under one uid at once, so killing every
    process of a build's uid kills that build's and nothing else."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or Path(tempfile.gettempdir()) / "evalsvc-compile-uids"

    @contextlib.contextmanager
    def held(self, wait_s: float = UID_WAIT_S) -> Iterator[int]:
        uid, fd = self._take(wait_s)
        try:
            yield uid
        finally:
            os.close(fd)  # closing drops the lock

    def _take(self, wait_s: float) -> tuple[int, int]:
        self._check_directory()
        deadline = time.monotonic() + wait_s
        while True:
            first = random.randrange(COMPILE_UIDS)  # spread over the range: fewer files tried when busy
            for i in range(COMPILE_UIDS):
                uid = COMPILE_UID_BASE + (first + i) % COMPILE_UIDS
                flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
                fd = os.open(self.directory / str(uid), flags, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                return uid, fd
            if time.monotonic() >= deadline:
                raise SandboxUnavailable(
                    f"all {COMPILE_UIDS} compile uids of this host stayed in use for {wait_s:g} s"
                )
            time.sleep(0.2)

    def _check_directory(self) -> None:
        """Root's own, writable by no one else: a build (which may write to the host's /tmp) must not be
        able to take the uids' locks, or put links where they are."""
        self.directory.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(self.directory)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise SandboxUnavailable(
                f"{self.directory} must be a directory of uid {os.geteuid()} that no one else can write"
            )


def kill_uid_tree(uid: int, wait_s: float = KILL_WAIT_S) -> int:
    """SIGKILL every process of compile uid `uid`, and wait until none is left; returns how many there
    were. Needs root.

    One kill(-1): the kernel signals every process the caller may signal in one pass under the task list
    lock, which fork takes too, and a fork whose parent has a SIGKILL pending is undone; so no process can
    slip out by forking (a scan of /proc and a kill per pid can be outrun by one that forks and exits), nor
    by its own process group or session. The caller is a child of this process with real and saved uid
    the build's killer uid and effective uid `uid`: it may signal the build's processes (its effective uid
    is their real uid), they may not signal it (none of its real and saved uids is theirs), so a build that
    kills all it may (`kill -9 -1` in a loop) cannot kill its killer; no other process has the killer uid.
    """
    if not COMPILE_UID_BASE <= uid < COMPILE_UID_BASE + COMPILE_UIDS:
        raise ValueError(f"{uid} is not a compile uid")  # kill(-1) as any other uid could hit others
    before = len(_live_pids(uid))
    deadline = time.monotonic() + wait_s
    while True:
        _kill_all_as(uid, COMPILE_KILLER_UID_BASE + uid - COMPILE_UID_BASE)
        left = _live_pids(uid)
        if not left:
            return before
        if time.monotonic() >= deadline:
            log.warning("%d process(es) of compile uid %d outlived SIGKILL: %s", len(left), uid, left[:20])
            return before
        time.sleep(0.02)


def _kill_all_as(uid: int, killer_uid: int) -> None:
    pid = os.fork()
    if pid == 0:  # the child: system calls only, then _exit (no Python-level cleanup, no locks)
        code = 1
        try:
            os.setresuid(killer_uid, uid, killer_uid)
            # Never kill(-1) with any other credentials: as root it would kill the whole host.
            if os.getresuid() == (killer_uid, uid, killer_uid):
                with contextlib.suppress(OSError):
                    os.kill(-1, signal.SIGKILL)
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise SandboxUnavailable(f"could not take compile uid {uid} to kill its processes ({status:#x})")


def _live_pids(uid: int) -> list[int]:
    """The processes whose real uid is `uid`, less zombies (dead; those that are this process' children,
    orphans when the worker is PID 1 or a subreaper, are reaped)."""
    found = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            real_uid = int(fields["Uid"].split()[0])
            state, parent = fields["State"].split()[0], int(fields["PPid"])
        except (OSError, KeyError, ValueError, IndexError):
            continue  # gone meanwhile
        if real_uid != uid:
            continue
        if state in ("Z", "X"):
            if parent == me:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(int(name), os.WNOHANG)
            continue
        found.append(int(name))
    return found


def kill_by_token(token: str, wait_s: float = KILL_WAIT_S) -> int:
    """Without root: SIGKILL every process whose environment holds this run's token, until none is left;
    returns how many. Best effort (a scan can be outrun, and a process may drop its environment), enough
    for a toolchain's detached children; without root there is no boundary to defend anyway."""
    needle = f"\0{RUN_TOKEN_VAR}={token}\0".encode()
    killed: set[int] = set()
    deadline = time.monotonic() + wait_s
    while True:
        found = [pid for pid in _pids() if pid != os.getpid() and needle in b"\0" + _environ(pid)]
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        killed.update(found)
        if not found:
            return len(killed)
        if time.monotonic() >= deadline:
            log.warning("%d process(es) of a sandbox run outlived SIGKILL for %g s", len(found), wait_s)
            return len(killed)
        time.sleep(0.02)


def _pids() -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def _environ(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _chown_tree(root: Path, uid: int) -> None:
    """`root` and everything in it to `uid`, links themselves and not what they point to."""
    os.chown(root, uid, uid, follow_symlinks=False)
    for parent, dirs, files in os.walk(root):
        for name in dirs + files:
            os.chown(os.path.join(parent, name), uid, uid, follow_symlinks=False)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _read_capped(f, size: int, cap: int) -> tuple[str, bool]:
    """Keep the head and the tail of a long log: errors come first, summaries last."""
    if size <= cap:
        f.seek(0)
        return f.read().decode(errors="replace"), False
    half = cap // 2
    f.seek(0)
    head = f.read(half)
    f.seek(size - half)
    tail = f.read(half)
    return head.decode(errors="replace") + f"\n[... {size - cap} bytes cut ...]\n" + tail.decode(
        errors="replace"
    ), True
