"""The one settings object (environment variables prefixed EVALSVC_), built once at start-up."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class CompileBackend(StrEnum):
    DOCKER = "docker"
    PROCESS = "process"


class RunnerIsolation(StrEnum):
    PROCESS = "process"
    NONE = "none"  # trusted local development only: no uid drop, no network namespace


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="EVALSVC_", env_file=None, extra="ignore")

    device: str = Field("cpu", description="'cpu' or 'cuda' / 'cuda:N' for this worker")
    data_dir: Path = Field(Path("/var/lib/evalsvc"), description="artifacts, precompiled headers, scratch")
    redis_url: str = "redis://127.0.0.1:6379/0"
    compile_backend: CompileBackend = CompileBackend.DOCKER
    compile_image: str = "evalsvc-compile:local"
    compile_timeout_s: float = 300.0
    compile_memory_bytes: int = 8 * 1024**3
    compile_cpus: float = 2.0
    cuda_home: str = "/usr/local/cuda"
    cuda_arch: str = Field("90a", description="nvcc target, e.g. 90a for Hopper (wgmma, TMA)")
    runner_isolation: RunnerIsolation = RunnerIsolation.PROCESS
    runner_memory_bytes: int = 16 * 1024**3
    artifact_store: str = Field("local", description="'local' (data_dir) or 'redis'")
    worker_name: str | None = None
    worker_kind: str = Field("compile", description="'compile' or 'gpu' (set by `evalsvc worker`)")
    worker_queue: str | None = Field(None, description="a GPU worker's own queue, e.g. gpu.<uuid>")
    device_class: str = Field("cpu", description="the class this GPU worker serves, e.g. H200")
    max_attempts: int = Field(3, ge=1, description="deliveries of one job before it fails for good")
    redelivery_after_s: int = Field(900, description="an unacked job goes back to its queue after this")
    retention_s: int = Field(7 * 86400, description="how long finished jobs and results are kept")

    @property
    def artifact_dir(self) -> Path:
        return self.data_dir / "artifacts"

    @property
    def pch_dir(self) -> Path:
        return self.data_dir / "pch"

    @property
    def scratch_dir(self) -> Path:
        return self.data_dir / "scratch"
