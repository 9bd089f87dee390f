"""Starts runner processes from a warm template (torch pre-imported) and talks to them with a watchdog."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import shutil
import signal
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsvc.engine.codec import BadMessage, decode, encode
from evalsvc.engine.runner import RunnerSetup, runner_main


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
    def __init__(self, proc: mp.process.BaseProcess, conn: Any, scratch: Path, device: str) -> None:
        self.proc = proc
        self.conn = conn
        self.scratch = scratch
        self.device = device

    def request(self, msg: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        try:
            self.conn.send_bytes(encode(msg))
            if not self.conn.poll(timeout_s):
                self.kill()
                raise RunnerTimeout(f"no answer within {timeout_s:.0f} s")
            blob = self.conn.recv_bytes()
        except (EOFError, OSError, BrokenPipeError):
            raise RunnerDied(self._death_note()) from None
        reply = decode(blob, map_location=self.device)
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
            self.conn.send_bytes(encode({"op": "exit"}))
        self.proc.join(timeout=5)
        self.kill()
        self.conn.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


class RunnerLauncher:
    """One per judge. The forkserver is the warm template: it imports torch once, never CUDA."""

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
        self.limits = limits or RunnerLimits()
        self.scratch_root = scratch_root or Path(tempfile.gettempdir())
        self.cover = cover
        self._ctx = mp.get_context("forkserver")
        self._ctx.set_forkserver_preload(["torch", "evalsvc.engine.runner"])

    def start(self, artifact: Path) -> RunnerHandle:
        scratch = Path(tempfile.mkdtemp(prefix="evalsvc-run-", dir=self.scratch_root))
        shutil.copytree(artifact, scratch / "artifact")
        parent, child = self._ctx.Pipe(duplex=True)
        setup = RunnerSetup(
            cover=str(self.cover) if self.cover else None,
            scratch=str(scratch),
            device=self.device,
            isolate=self.isolate,
            memory_bytes=self.limits.memory_bytes,
        )
        proc = self._ctx.Process(target=runner_main, args=(child, setup), daemon=True)
        proc.start()
        child.close()
        return RunnerHandle(proc, parent, scratch, self.device)
