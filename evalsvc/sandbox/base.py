"""The compile sandbox interface: run one command over one job's files, with limits, and report.

Backends (Docker, a local process) implement `CompileSandbox`; the compile stage only sees this.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

_JOB: ContextVar[str | None] = ContextVar("evalsvc_sandbox_job", default=None)


class SandboxUnavailable(RuntimeError):
    """The configured backend cannot run here (no engine, no permission, no image)."""


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits for one sandboxed command."""

    wall_seconds: float = 300.0
    memory_bytes: int = 8 * 1024**3
    cpus: float = 2.0
    pids: int = 512
    nofile: int = 1024
    fsize_bytes: int = 1024**3
    output_bytes: int = 256 * 1024


@dataclass(frozen=True)
class Mount:
    """A host directory made visible inside the sandbox."""

    host_path: Path
    sandbox_path: str
    read_only: bool = True


@dataclass
class SandboxRun:
    """What happened to one sandboxed command."""

    exit_code: int | None
    output: str
    timed_out: bool = False
    oom_killed: bool = False
    duration_s: float = 0.0
    output_truncated: bool = False
    extra: dict[str, str] = field(default_factory=dict)


class CompileSandbox(Protocol):
    """Runs `argv` with `mounts` under `limits`; the job's scratch space is private and executable."""

    name: str

    def run(
        self, argv: list[str], mounts: list[Mount], limits: SandboxLimits, env: dict[str, str]
    ) -> SandboxRun: ...

    def check(self) -> None:
        """Raise SandboxUnavailable with a reason if this backend cannot run jobs here."""


@contextmanager
def sandbox_job(job_id: str) -> Iterator[None]:
    """Runs started inside (this thread, this context) serve job `job_id`: a backend that labels what it
    starts says so (Docker: the `evalsvc.job` label of each container)."""
    token = _JOB.set(job_id)
    try:
        yield
    finally:
        _JOB.reset(token)


def current_job() -> str | None:
    """The job the runs started now serve (`sandbox_job`), if the caller said."""
    return _JOB.get()
