"""Starts runner processes from a warm template (torch pre-imported) and talks to them with a watchdog."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import shutil
import signal
import tempfile
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsvc.engine.codec import Arena, BadMessage, receive, send
from evalsvc.engine.runner import READY, RunnerSetup, runner_main
from evalsvc.sandbox.isolation import runner_uid

log = logging.getLogger("evalsvc.launcher")

# Imported once by the forkserver, so no runner pays for them per evaluation: torch._dynamo, which the
# runner's operator trace (a dispatch mode) imports on first use (seconds in every evaluation's first
# trial call on the H200), and setuptools, most of the `torch.utils.cpp_extension` import that every
# load_inline solution makes (0.115 -> 0.02 s here). Not cpp_extension itself: importing it asks torch
# for the CUDA device count, after which a forked child cannot use CUDA ("Cannot re-initialize CUDA in
# forked subprocess", seen on the H200; tests/unit/test_forkserver_preload.py).
PRELOAD = [
    "torch",
    "torch._dynamo",
    "setuptools",
    "evalsvc.build.inline",
    "evalsvc.engine.runner",
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
    ) -> None:
        self.proc = proc
        self.conn = conn
        self.scratch = scratch
        self.device = device
        self.arena = arena
        self.uid = uid
        self.ready = False  # the runner says so once isolated and warm, before any candidate code runs
        self.makes_inputs = True  # the judge sends seeds, not input sets, until the runner cannot use them

    def wait_ready(self, timeout_s: float) -> None:
        """Block until the runner has finished its start (isolation, CUDA context, imports)."""
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

    def request(self, msg: dict[str, Any], timeout_s: float, reply_bytes: int = 0) -> dict[str, Any]:
        """Send `msg`, wait for the answer. `reply_bytes`: room to keep in the arena for the reply's
        tensors when the message carries fewer than they will need (else they come back as pipe frames)."""
        self.wait_ready(timeout_s)
        if self.arena is not None and reply_bytes:
            self.arena.reserve(reply_bytes)
        try:
            send(self.conn, msg, self.arena, grow=True)
            if not self.conn.poll(timeout_s):
                self.kill()
                raise RunnerTimeout(f"no answer within {timeout_s:.0f} s")
            reply = receive(self.conn, map_location=self.device, timeout_s=timeout_s, arena=self.arena)
        except TimeoutError:
            self.kill()
            raise RunnerTimeout(f"the answer did not arrive within {timeout_s:.0f} s") from None
        except (EOFError, OSError, BrokenPipeError):
            raise RunnerDied(self._death_note()) from None
        if not isinstance(reply, dict) or "ok" not in reply:
            raise BadMessage("runner reply is not a status dict")
        return reply

    def _death_note(self) -> str:
        self.proc.join(timeout=5)
        code = self.proc.exitcode
        how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
        return f"the candidate process ended ({how})" + self.log_tail()

    def log_tail(self, limit: int = 1500) -> str:
        try:
            text = (self.scratch / "candidate.log").read_bytes()[-limit:].decode(errors="replace").strip()
        except OSError:
            return ""
        return f"; its last output:\n{text}" if text else ""

    def kill(self) -> None:
        pid = self.proc.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.join(timeout=10)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            send(self.conn, {"op": "exit"})
        self.proc.join(timeout=5)
        self.kill()
        self.conn.close()
        if self.arena is not None:
            self.arena.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


class RunnerLauncher:
    """One per judge. The forkserver is the warm template: it imports torch once, never CUDA.

    With `keep_spare`, runners are started ahead (`prestart`, once all timing of an evaluation is over)
    so that two wait in line: the next evaluation takes the older, already warm one, and the younger
    finishes its start (isolation, CUDA context, imports) beside that evaluation's load and trials; the
    judge waits for it (`settle`) before anything is timed. Successive runners alternate between the
    device's two uids, so a candidate cannot signal or trace the spare that waits beside it.
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
        self.uids = (runner_uid(device, 0), runner_uid(device, 1))
        self.limits = limits or RunnerLimits()
        self.scratch_root = scratch_root or Path(tempfile.gettempdir())
        self.cover = cover
        self.keep_spare = True  # the GPU worker benchmark turns it off to compare
        self._spares: deque[RunnerHandle] = deque()  # oldest first; neighbours have different uids
        self._last_uid = self.uids[1]
        self._ctx = mp.get_context("forkserver")
        self._ctx.set_forkserver_preload(PRELOAD)

    def start(self, artifact: Path) -> RunnerHandle:
        """A runner for `artifact`: the oldest spare that is still alive, else a new one."""
        handle = None
        while self._spares and handle is None:
            spare = self._spares.popleft()
            if spare.proc.is_alive():
                handle = spare
            else:
                spare.close()
        if handle is None:
            handle = self._spawn()
        target = handle.scratch / "artifact"
        shutil.copytree(artifact, target)
        if self.isolate:  # the runner drops to its uid before it reads the artifact: hand the files over
            for path in [target, *target.rglob("*")]:
                os.chown(path, handle.uid, handle.uid, follow_symlinks=False)
        return handle

    def prestart(self) -> None:
        """Start spares up to `SPARES`, after every timing of the evaluation that just ended."""
        while self.keep_spare and len(self._spares) < self.SPARES:
            self._spares.append(self._spawn())

    def settle(self) -> None:
        """Wait until every spare has finished starting, so none runs its start beside a timed kernel. A
        spare that fails to start is dropped; a later evaluation then starts its own runner."""
        for spare in list(self._spares):
            try:
                spare.wait_ready(self.limits.load_timeout_s)
            except (RunnerDied, RunnerTimeout, BadMessage) as e:
                log.warning("spare runner dropped: %s", e)
                spare.close()
                self._spares.remove(spare)

    def close(self) -> None:
        """Stop the spare runners and remove their scratch directories (worker shutdown, tests)."""
        while self._spares:
            self._spares.popleft().close()

    def _spawn(self) -> RunnerHandle:
        """A new runner under the uid its predecessor did not have."""
        uid = self.uids[1] if self._last_uid == self.uids[0] else self.uids[0]
        self._last_uid = uid
        scratch = Path(tempfile.mkdtemp(prefix="evalsvc-run-", dir=self.scratch_root))
        parent, child = self._ctx.Pipe(duplex=True)
        setup = RunnerSetup(
            cover=str(self.cover) if self.cover else None,
            scratch=str(scratch),
            device=self.device,
            isolate=self.isolate,
            memory_bytes=self.limits.memory_bytes,
            uid=uid,
        )
        arena = Arena.create()
        proc = self._ctx.Process(target=runner_main, args=(child, setup, arena), daemon=True)
        proc.start()
        child.close()
        return RunnerHandle(proc, parent, scratch, self.device, arena, uid)
