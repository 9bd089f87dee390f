"""Compile sandbox as a local process: rlimits, a scrubbed environment, an unprivileged uid when root.

For GPU hosts without a Docker engine, and for development. Weaker than Docker (no filesystem view of
its own); mounts are not remapped, so sandbox paths in argv/env are rewritten to the host paths.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from evalsvc.sandbox.base import Mount, SandboxLimits, SandboxRun, SandboxUnavailable
from evalsvc.sandbox.isolation import SANDBOX_UID, drop_privileges, unshare_network


class ProcessSandbox:
    name = "process"

    def __init__(self, isolate: bool = True) -> None:
        self.isolate = isolate and os.geteuid() == 0

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

        with tempfile.TemporaryDirectory(prefix="evalsvc-sbx-") as scratch:
            if self.isolate:
                os.chown(scratch, SANDBOX_UID, SANDBOX_UID)
                for m in mounts:
                    if not m.read_only:
                        os.chown(m.host_path, SANDBOX_UID, SANDBOX_UID)
            full_env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": scratch,
                "TMPDIR": scratch,
                "EVALSVC_SCRATCH": scratch,
                "LANG": "C.UTF-8",
                **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}),
                **({"CUDA_HOME": os.environ["CUDA_HOME"]} if "CUDA_HOME" in os.environ else {}),
                **{k: remap(v) for k, v in env.items()},
            }
            return self._spawn([remap(a) for a in argv], full_env, scratch, limits)

    def _spawn(self, argv: list[str], env: dict[str, str], cwd: str, limits: SandboxLimits) -> SandboxRun:
        isolate = self.isolate

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
            if isolate:
                unshare_network()
                drop_privileges()

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
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            _kill_group(proc.pid)
            sink.seek(0, os.SEEK_END)
            size = sink.tell()
            output, truncated = _read_capped(sink, size, limits.output_bytes)
        code = None if timed_out else proc.returncode
        oom = code is not None and code < 0 and -code == signal.SIGKILL and not timed_out
        return SandboxRun(code, output, timed_out, oom, time.monotonic() - start, truncated)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _read_capped(f, size: int, cap: int) -> tuple[str, bool]:  # type: ignore[no-untyped-def]
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
