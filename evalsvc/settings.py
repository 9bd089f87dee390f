"""The one settings object (environment variables prefixed EVALSVC_, and secret files), built once at
start-up."""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SecretsSettingsSource,
    SettingsConfigDict,
)

# A directory of files named like the variables (evalsvc_api_keys, evalsvc_redis_url), one secret each:
# what a secrets mount provides, and what `evalsvc up` hands each child instead of its environment.
SECRETS_DIR_VARIABLE = "EVALSVC_SECRETS_DIR"


class CompileBackend(StrEnum):
    DOCKER = "docker"
    PROCESS = "process"


class ArtifactStoreKind(StrEnum):
    LOCAL = "local"  # data_dir/artifacts: one machine, or a shared disk
    REDIS = "redis"  # small fleets: artifacts of a few MB in Redis memory
    S3 = "s3"  # a fleet: an S3-compatible object store (evalsvc/store/s3_artifacts.py)


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
    runner_call_timeout_s: float = Field(60.0, description="watchdog for one candidate call")
    profile_ncu: bool = Field(
        False,
        description="run Nsight Compute on profiled candidates (uid drop and rlimits, but no network or "
        "mount namespace: ncu's injection needs them); off unless the fleet trusts that",
    )
    artifact_store: ArtifactStoreKind = Field(
        ArtifactStoreKind.LOCAL, description="'local' (data_dir), 'redis' or 's3' (the s3_ settings)"
    )
    # the S3-compatible artifact store (artifact_store='s3'); its keys as secret files, like the Redis URL
    s3_endpoint_url: str | None = Field(None, description="e.g. http://minio:9000; unset: AWS S3 itself")
    s3_bucket: str = Field("evalsvc-artifacts", description="created by the operator, not by evalsvc")
    s3_region: str = "us-east-1"
    s3_access_key_id: SecretStr | None = Field(None, description="unset: boto3's own chain (e.g. a pod role)")
    s3_secret_access_key: SecretStr | None = None
    s3_retention_days: float = Field(
        7.0, gt=0, description="`evalsvc prune-artifacts` removes artifacts stored longer ago than this"
    )
    s3_max_object_bytes: int = Field(
        256 * 1024**2, ge=1, description="the largest packed artifact put or fetched"
    )
    s3_timeout_s: float = Field(10.0, gt=0, description="connect and read timeout of one S3 request")
    worker_name: str | None = None
    worker_kind: str = Field("compile", description="'compile' or 'gpu' (set by `evalsvc worker`)")
    worker_queue: str | None = Field(None, description="a GPU worker's own queue, e.g. gpu.<uuid>")
    device_class: str = Field("cpu", description="the class this GPU worker serves, e.g. H200")
    max_attempts: int = Field(3, ge=1, description="deliveries of one job before it fails for good")
    redelivery_after_s: int = Field(
        900, ge=1, description="an unacked job (its worker died) goes back to its queue after this"
    )
    route_wait_s: float = Field(
        120.0, ge=0, description="how long a compiled job waits for a live GPU worker of its class"
    )
    retention_s: int = Field(7 * 86400, description="how long finished jobs and results are kept")
    # HTTP gateway (evalsvc.api)
    http_host: str = Field("127.0.0.1", description="address the gateway listens on")
    http_port: int = Field(8000, ge=0, le=65535)
    http_workers: int = Field(1, ge=1, description="uvicorn processes; >1 rebuilds Settings from the env")
    api_keys: dict[str, str] = Field(
        default_factory=dict, repr=False, description="API key -> tenant; empty turns auth off (dev only)"
    )
    task_authors: list[str] | None = Field(
        None,
        description="tenants that may register tasks or send inline ones; unset: every tenant. A task's code "
        "runs isolated like a candidate's (docs/security.md); this narrows who may spend device time on "
        "task code at all, for an operator who serves shared tasks only",
    )
    rate_limit_per_s: float = Field(50.0, ge=0, description="requests per second per API key; 0 = off")
    rate_burst: int = Field(200, ge=1, description="token-bucket size of the per-key rate limit")
    max_inflight_per_tenant: int = Field(8192, ge=1, description="unfinished jobs one tenant may hold")
    max_queue_depth: int = Field(50_000, ge=0, description="compile-queue length past which POSTs get 503")
    max_body_bytes: int = Field(4 * 1024**2, ge=1, description="largest request body the gateway reads")
    max_batch: int = Field(1024, ge=1, description="evaluations in one batch")
    max_wait_s: float = Field(120.0, ge=0, description="cap of the ?wait= long-poll")
    event_heartbeat_s: float = Field(
        15.0,
        gt=0,
        description="an event stream's keep-alive comment when idle this long (and its re-read of the batch)",
    )
    idempotency_ttl_s: int = Field(86400, ge=1, description="how long an Idempotency-Key is remembered")
    redis_timeout_s: float = Field(5.0, gt=0, description="the gateway's Redis connect/read timeout")
    prometheus_multiproc_dir: Path | None = Field(
        None,
        validation_alias="PROMETHEUS_MULTIPROC_DIR",
        description="prometheus-client's own variable: metrics aggregated over processes when set",
    )
    # observability (evalsvc.observability; docs/observability.md)
    metrics_port: int | None = Field(
        None, ge=0, le=65535, description="workers: port of this worker's Prometheus exporter; unset = none"
    )
    metrics_host: str = Field("127.0.0.1", description="workers: address the exporter listens on")
    gpu_uuid: str | None = Field(
        None, description="GPU workers: NVML UUID of this worker's GPU (NVML ignores CUDA_VISIBLE_DEVICES)"
    )
    gpu_max_temp_c: float = Field(85.0, description="GPU temperature above which timings are not trusted")
    git_commit: str | None = Field(
        None, description="the commit the image was built from (a build argument), for evalsvc_build_info"
    )
    log_format: Literal["json", "text"] = Field("json", description="json: one JSON object per line")
    log_level: str = Field("INFO", description="root log level of workers and the gateway")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        secrets_dir = os.environ.get(SECRETS_DIR_VARIABLE) or None
        return (init_settings, env_settings, SecretsSettingsSource(settings_cls, secrets_dir=secrets_dir))

    @property
    def artifact_dir(self) -> Path:
        return self.data_dir / "artifacts"

    @property
    def pch_dir(self) -> Path:
        return self.data_dir / "pch"

    @property
    def scratch_dir(self) -> Path:
        return self.data_dir / "scratch"
