"""Starts runner processes from a warm template (torch pre-imported) and talks to them with a watchdog."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import shutil
import signal
import tempfile
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

    def request(self, msg: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        self.wait_ready(timeout_s)
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

    With `keep_spare`, each evaluation's runner is taken from a spare started when the previous evaluation
    began, and the next spare is started at once, so its isolation, CUDA context and imports overlap this
    evaluation's load and trials; the judge waits for it (`settle`) before anything is timed. The spare
    and the runner in use always have different uids (`runner_uid`'s two slots), so a candidate cannot
    signal or trace the runner of the next evaluation.
    """

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
        self._spare: RunnerHandle | None = None
        self._last_uid = self.uids[1]
        self._ctx = mp.get_context("forkserver")
        self._ctx.set_forkserver_preload(PRELOAD)

    def start(self, artifact: Path) -> RunnerHandle:
        """A runner for `artifact`: the spare when it is still alive, else a new one; then the next spare."""
        handle, self._spare = self._spare, None
        if handle is None or not handle.proc.is_alive():
            if handle is not None:
                handle.close()
            handle = self._spawn(self._other(self._last_uid))
        self._last_uid = handle.uid
        if self.keep_spare:
            self._spare = self._spawn(self._other(handle.uid))
        target = handle.scratch / "artifact"
        shutil.copytree(artifact, target)
        if self.isolate:  # the runner drops to its uid before it reads the artifact: hand the files over
            for path in [target, *target.rglob("*")]:
                os.chown(path, handle.uid, handle.uid, follow_symlinks=False)
        return handle

    def settle(self) -> None:
        """Wait until the spare has finished starting, so it runs nothing beside a timed kernel. A spare
        that fails to start is dropped; the next evaluation then starts its own runner."""
        if self._spare is None:
            return
        try:
            self._spare.wait_ready(self.limits.load_timeout_s)
        except (RunnerDied, RunnerTimeout, BadMessage) as e:
            log.warning("spare runner dropped: %s", e)
            self._spare.close()
            self._spare = None

    def close(self) -> None:
        """Stop the spare runner and remove its scratch directory (worker shutdown, tests)."""
        if self._spare is not None:
            self._spare.close()
            self._spare = None

    def _other(self, uid: int) -> int:
        return self.uids[1] if uid == self.uids[0] else self.uids[0]

    def _spawn(self, uid: int) -> RunnerHandle:
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
