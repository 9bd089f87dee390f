"""Starts runner processes from a warm template (torch pre-imported) and talks to them with a watchdog."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import multiprocessing as mp
import os
import shutil
import signal
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsvc.engine.codec import MAX_MESSAGE_BYTES, Arena, BadMessage, receive, send
from evalsvc.engine.triton_driver import add_driver, driver_cache, signatures
from evalsvc.sandbox.isolation import RUNNER_UIDS, runner_uid, untrusted_file_tail
from evalsvc.sandbox.memory_bound import oom_kills, prepare_memory_group
from evalsvc.sandbox.template_env import use_clean_template
from evalsvc.sandboxed.runner import READY, RunnerSetup, runner_main
from evalsvc.sandboxed.triton_runtime import CACHE as TRITON_CACHE

log = logging.getLogger("evalsvc.launcher")

# Imported once by the forkserver, so no runner pays for them per evaluation; not cpp_extension, after
# which a forked child cannot use CUDA (docs/performance.md; tests/unit/test_forkserver_preload.py).
PRELOAD = [
    "torch",
    "torch._dynamo",
    "setuptools",
    "evalsvc.compiler.inline",
    "evalsvc.sandboxed.runner",
]


class RunnerDied(Exception):
    """The runner process ended without answering (crash, os._exit, a fatal CUDA error, a kill)."""


class RunnerTimeout(Exception):
    """The runner did not answer in time; it has been killed with its whole process group."""


@dataclass(frozen=True)
class RunnerLimits:
    memory_bytes: int = 16 * 1024**3
    load_timeout_s: float = 120.0
    call_timeout_s: float = 60.0


class RunnerHandle:
    def __init__(
        self,
        proc: mp.process.BaseProcess,
        conn: Any,
        scratch: Path,
        device: str,
        arena: Arena | None,
        uid: int,
        on_close: Callable[[int], None] | None = None,
        isolated: bool = False,
        reply_limit: int = MAX_MESSAGE_BYTES,
        memory_group: str | None = None,
        oom_kills_before: int = 0,
    ) -> None:
        self.proc = proc
        self.conn = conn
        self.scratch = scratch
        self.device = device
        self.arena = arena
        self.uid = uid
        self._on_close = on_close  # hands the uid back to the launcher once the process is gone
        self.isolated = isolated  # it runs as `uid`, which no other live process has
        self.reply_limit = reply_limit  # tensor bytes one reply may make the judge hold (codec.receive)
        self.memory_group = memory_group
        self._oom_kills = oom_kills_before  # the group's count before this process started: a rise is its own
        self.ready = False  # the runner says so once isolated and warm, before any candidate code runs
        self.makes_inputs = True  # the judge sends seeds, not input sets, until the runner cannot use them
        self.closed = False
        self._ready_lock = threading.Lock()

    def wait_ready(self, timeout_s: float) -> None:
        """Block until the runner has finished its start (isolation, CUDA context, imports). Thread-safe:
        the launcher's `settle` may wait for a spare that an evaluation has just taken, and only one of
        them may read its pipe."""
        with self._ready_lock:
            self._wait_ready(timeout_s)

    def _wait_ready(self, timeout_s: float) -> None:
        if self.ready:
            return
        try:
            if not self.conn.poll(timeout_s):
                self.kill()
                raise RunnerTimeout(f"the runner did not start within {timeout_s:.0f} s")
            hello = receive(self.conn, timeout_s=timeout_s)
        except (EOFError, OSError, BrokenPipeError):
            raise RunnerDied(self._death_note()) from None
        if hello != READY:
            raise BadMessage("the runner's first message is not its ready signal")
        self.ready = True

    def request(self, msg: Mapping[str, Any], timeout_s: float, reply_bytes: int = 0) -> dict[str, Any]:
        """Send `msg`, wait for the answer. `reply_bytes`: room to keep in the arena for the reply's
        tensors when the message carries fewer than they will need (else they come back as pipe frames)."""
        self.wait_ready(timeout_s)
        if self.arena is not None and reply_bytes:
            self.arena.reserve(reply_bytes)
        deadline = time.monotonic() + timeout_s  # one for the request: sending, waiting and reading together
        try:
            self._send(msg, timeout_s)
            if not self.conn.poll(max(0.0, deadline - time.monotonic())):
                self.kill()
                raise RunnerTimeout(f"no answer within {timeout_s:.0f} s")
            left = max(0.0, deadline - time.monotonic())
            reply = receive(self.conn, self.device, left, self.arena, max_bytes=self.reply_limit)
        except TimeoutError:
            self.kill()
            raise RunnerTimeout(f"the answer did not arrive within {timeout_s:.0f} s") from None
        except (EOFError, OSError, BrokenPipeError):
            raise RunnerDied(self._death_note()) from None
        if not isinstance(reply, dict) or "ok" not in reply:
            raise BadMessage("runner reply is not a status dict")
        return reply

    def _send(self, msg: Mapping[str, Any], timeout_s: float) -> None:
        """Send under the watchdog too: a process that stops reading its pipe would otherwise block the
        judge in a send of pipe frames for ever (a task did)."""
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            self.kill()

        watchdog = threading.Timer(timeout_s, expire)
        watchdog.daemon = True
        watchdog.start()
        try:
            send(self.conn, msg, self.arena, grow=True)
        except (OSError, BrokenPipeError):
            if expired.is_set():
                raise RunnerTimeout(f"it did not read the request within {timeout_s:.0f} s") from None
            raise
        finally:
            watchdog.cancel()
        if expired.is_set():
            raise RunnerTimeout(f"it did not read the request within {timeout_s:.0f} s")

    def _death_note(self) -> str:
        self.proc.join(timeout=5)
        code = self.proc.exitcode
        how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
        if oom_kills(self.memory_group) > self._oom_kills:
            how += f", killed at its memory limit ({self.reply_limit / 2**30:.3g} GiB)"
        return f"the candidate process ended ({how})" + self.log_tail()

    def log_tail(self, limit: int = 1500) -> str:
        owner = self.uid if self.isolated else os.getuid()
        tail = untrusted_file_tail(self.scratch / "candidate.log", limit, owner)
        text = tail.decode(errors="replace").strip()
        return f"; its last output:\n{text}" if text else ""

    def kill(self) -> None:
        pid = self.proc.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.join(timeout=10)
        if self.isolated:
            kill_uid(self.uid)  # anything the runner started that left its process group

    def close(self) -> None:
        """Stop the runner and hand its uid back (idempotent)."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(Exception):
            send(self.conn, {"op": "exit"})
        self.proc.join(timeout=5)
        self.kill()
        self.conn.close()
        if self.arena is not None:
            self.arena.close()
        shutil.rmtree(self.scratch, ignore_errors=True)
        if self._on_close is not None:
            self._on_close(self.uid)


class UidLocks:
    """Host-wide ownership of runner uids: an exclusive flock on one file per uid, held while a runner (or
    the Nsight target) of this launcher may run under it; released by the kernel if this process dies."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or Path(tempfile.gettempdir()) / "evalsvc-runner-uids"
        self.directory.mkdir(mode=0o700, exist_ok=True)
        self._held: dict[int, int] = {}

    def hold(self, uid: int) -> bool:
        fd = os.open(self.directory / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._held[uid] = fd
        return True

    def release(self, uid: int) -> None:
        fd = self._held.pop(uid, None)
        if fd is not None:
            os.close(fd)  # closing drops the lock

    def __del__(self) -> None:  # a launcher dropped without close(): its uids go back to the host
        for uid in list(self._held):
            self.release(uid)


def kill_uid(uid: int, rounds: int = 20, wait_s: float = 30.0) -> int:
    """SIGKILL every process running as `uid` (a runner's uid is its own while it lives, so whatever still
    runs under it after the runner is gone escaped the process-group kill: a forked child in a session of
    its own, which could slow the baselines timed next or signal the next runner). Each is stopped first,
    until none runs: a stopped process cannot fork, so a fork bomb cannot refill the process slots the kill
    frees. Then waits up to `wait_s` until none is left but zombies: hundreds of killed fork-bomb children
    at their memory cgroup's limit take seconds to exit on two cores. Returns how many were killed."""
    for _ in range(rounds):
        running = [pid for pid, state in processes_of(uid) if state not in ("T", "Z")]
        for pid in running:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        if not running:
            break
    killed: set[int] = set()
    started = time.monotonic()
    deadline = started + wait_s
    while found := [pid for pid, state in processes_of(uid) if state != "Z"]:  # a zombie is init's to reap
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        killed.update(found)
        if time.monotonic() > deadline:
            log.error("%d process(es) of runner uid %d left %.0f s after SIGKILL", len(found), uid, wait_s)
            break
        time.sleep(0.05)
    if killed:
        waited = time.monotonic() - started
        log.warning("killed %d leftover process(es) of runner uid %d in %.1f s", len(killed), uid, waited)
    return len(killed)


def processes_of(uid: int) -> list[tuple[int, str]]:
    """(pid, scheduler state letter) of every process whose real uid is `uid`."""
    found = []
    for pid in (int(d) for d in os.listdir("/proc") if d.isdigit()):
        try:
            with open(f"/proc/{pid}/status") as f:
                fields = dict(line.split(":\t", 1) for line in f if ":\t" in line)
            if int(fields["Uid"].split()[0]) == uid:
                found.append((pid, fields["State"].split()[0]))
        except (OSError, ValueError, KeyError, IndexError):
            continue
    return found


class RunnerLauncher:
    """One per judge. The forkserver is the warm template: it imports torch once, never CUDA.

    With `keep_spare`, runners are started ahead (`prestart`, as an evaluation ends) so that two wait in
    line: the next evaluation takes the older, already warm one, and the younger finishes its start
    (isolation, CUDA context, imports; no kernel) beside whatever runs on a GPU, timing included.
    Every runner alive at once (evaluations in flight and spares) has a uid of its own among the device's
    `RUNNER_UIDS`, the one freed longest ago, so a candidate cannot signal or trace a runner beside it or
    the one that follows it. Thread-safe: the evaluations in flight on a GPU worker share one launcher.
    """

    SPARES = 2

    def __init__(
        self,
        device: str,
        isolate: bool,
        limits: RunnerLimits | None = None,
        scratch_root: Path | None = None,
        cover: Path | None = None,
    ) -> None:
        self.device = device
        self.isolate = isolate
        self.uids = tuple(runner_uid(device, slot) for slot in range(RUNNER_UIDS))
        self.limits = limits or RunnerLimits()
        self.scratch_root = scratch_root or Path(tempfile.gettempdir())
        self.cover = cover
        self.keep_spare = True  # the GPU worker benchmark turns it off to compare
        self._spares: deque[RunnerHandle] = deque()  # oldest first
        self._free_uids: deque[int] = deque(self.uids)  # freed longest ago first
        self._uid_locks = UidLocks()
        self._lock = threading.Lock()
        self._ctx = mp.get_context("forkserver")
        self._ctx.set_forkserver_preload(PRELOAD)
        use_clean_template(self._ctx)  # runners fork from it: it must never have held a secret

    def start(self, artifact: Path) -> RunnerHandle:
        """A runner for `artifact`: the oldest spare that is still alive, else a new one."""
        handle = None
        while handle is None:
            with self._lock:
                spare = self._spares.popleft() if self._spares else None
            if spare is None:
                handle = self._spawn()
            elif spare.proc.is_alive():
                handle = spare
            else:
                spare.close()
        target = handle.scratch / "artifact"
        shutil.copytree(artifact, target)
        kernels = target / TRITON_CACHE
        if kernels.is_dir() and self.device.startswith("cuda"):  # the runner may not run what Triton runs
            built = driver_cache(signatures(_traced_signatures(target / "manifest.json")))
            if built is not None:
                add_driver(kernels, *built)
        if self.isolate:  # the runner drops to its uid before it reads the artifact: hand the files over
            for path in [target, *target.rglob("*")]:
                os.chown(path, handle.uid, handle.uid, follow_symlinks=False)
        return handle

    def start_reference(self) -> RunnerHandle:
        """A process for a task's code (reference_host.py): the same isolation as a candidate's runner, a
        uid of its own; never a spare (a spare's filter refuses the compilers torch.compile runs)."""
        return self._spawn(reference=True)

    def prestart(self) -> None:
        """Start spares up to `SPARES`, as an evaluation ends."""
        while self.keep_spare:
            with self._lock:  # spares take only uids no evaluation in flight needs
                if len(self._spares) >= self.SPARES or len(self._free_uids) <= self.SPARES:
                    return
            try:
                spare = self._spawn()
            except RuntimeError as e:  # other launchers on this host hold the uids: start runners when asked
                log.warning("no spare runner: %s", e)
                return
            with self._lock:
                self._spares.append(spare)

    def settle(self) -> None:
        """Wait until every spare has finished starting, so that none runs its start beside a call timed
        on the CPU device, whose cores the start would take. A spare that fails to start is dropped; a
        later evaluation then starts its own runner."""
        with self._lock:
            spares = list(self._spares)
        for spare in spares:
            try:
                spare.wait_ready(self.limits.load_timeout_s)
            except (RunnerDied, RunnerTimeout, BadMessage) as e:
                log.warning("spare runner dropped: %s", e)
                with self._lock:
                    if spare in self._spares:
                        self._spares.remove(spare)
                spare.close()

    def close(self) -> None:
        """Stop the spare runners and remove their scratch directories (worker shutdown, tests)."""
        with self._lock:
            spares, self._spares = list(self._spares), deque()
        for spare in spares:
            spare.close()

    @contextlib.contextmanager
    def borrowed_uid(self) -> Iterator[int]:
        """A runner uid no live runner has, for a candidate process started outside the launcher (the
        Nsight Compute target)."""
        uid = self._take_uid()
        try:
            yield uid
        finally:
            self._free_uid(uid)

    def _take_uid(self) -> int:
        """The free uid freed longest ago that no other launcher on this host holds (a lock file per uid:
        two workers or a worker and a CLI on one host would otherwise hand one uid to two live runners)."""
        with self._lock:
            for _ in range(len(self._free_uids)):
                uid = self._free_uids.popleft()
                if self.isolate and not self._uid_locks.hold(uid):
                    self._free_uids.append(uid)
                    continue
                return uid
            raise RuntimeError(f"all {RUNNER_UIDS} runner uids of {self.device} are in use")

    def _free_uid(self, uid: int) -> None:
        with self._lock:
            if self.isolate:
                self._uid_locks.release(uid)
            self._free_uids.append(uid)

    def _spawn(self, reference: bool = False) -> RunnerHandle:
        """A new runner under the uid freed longest ago (anything still running under it killed first)."""
        uid = self._take_uid()
        if self.isolate:
            kill_uid(uid)
        try:
            scratch = Path(tempfile.mkdtemp(prefix="evalsvc-run-", dir=self.scratch_root))
            parent, child = self._ctx.Pipe(duplex=True)
            setup = RunnerSetup(
                cover=str(self.cover) if self.cover else None,
                scratch=str(scratch),
                device=self.device,
                isolate=self.isolate,
                memory_bytes=self.limits.memory_bytes,
                uid=uid,
                reference=reference,
                memory_group=prepare_memory_group(uid, self.limits.memory_bytes) if self.isolate else None,
            )
            killed_before = oom_kills(setup.memory_group)
            arena = Arena.create()
            proc = self._ctx.Process(target=runner_main, args=(child, setup, arena), daemon=True)
            proc.start()
        except BaseException:
            self._free_uid(uid)
            raise
        child.close()
        # No reply makes the judge hold more than its sender may (a GPU judge gathers pipe frames on host).
        limit = self.limits.memory_bytes
        return RunnerHandle(
            proc, parent, scratch, self.device, arena, uid, self._free_uid, self.isolate, limit,
            setup.memory_group, killed_before,
        )  # fmt: skip


def _traced_signatures(manifest: Path) -> list[str]:
    """The kernel signatures a Triton artifact's compile stage traced (its manifest, written by the stage)."""
    try:
        report = json.loads(manifest.read_text()).get("report") or {}
        return [str(k.get("signature", "")) for k in (report.get("triton") or {}).get("kernels") or []]
    except (OSError, ValueError, AttributeError):
        return []
