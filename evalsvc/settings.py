"""The one settings object (environment variables prefixed EVALSVC_, and secret files), built once at
start-up."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

from pydantic import Field, SecretStr, field_validator
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


REDIS_SCHEMES = ("redis", "rediss", "unix", "sentinel")
SENTINEL_PORT = 26379
SENTINEL_FORM = "sentinel://[[user]:password@]host[:port][,host[:port]...]/<master name>[/<db>]"
_MASTER_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")


@dataclass(frozen=True)
class RedisSentinel:
    """A Sentinel URL's parts: where to ask, for which master, and how to log in to it (the password is the
    Redis servers'; the sentinels are asked without one, as redis-py and Kombu do by default)."""

    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = None


def parse_sentinel_url(url: str) -> RedisSentinel:
    """`SENTINEL_FORM` into its parts; ValueError naming what is wrong (never echoing the password)."""
    parts = urlsplit(url)
    if parts.scheme != "sentinel":
        raise ValueError(f"not a sentinel:// URL; the form is {SENTINEL_FORM}")
    if parts.query or parts.fragment:
        raise ValueError(f"a sentinel URL takes no query or fragment; the form is {SENTINEL_FORM}")
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    username, _, password = userinfo.partition(":") if userinfo else ("", "", "")
    sentinels = tuple(_sentinel_address(h) for h in hostlist.split(","))
    path = parts.path.split("/")[1:]
    if not path or not path[0] or len(path) > 2:
        raise ValueError(f"a sentinel URL names its master after the hosts: {SENTINEL_FORM}")
    if not _MASTER_NAME.fullmatch(path[0]):
        raise ValueError(f"master name {path[0]!r}: letters, digits, '.', '_' and '-' only (1 to 128)")
    db = path[1] if len(path) == 2 else "0"
    if not re.fullmatch(r"[0-9]{1,6}", db):
        raise ValueError(f"database {db!r} is not a number; the form is {SENTINEL_FORM}")
    return RedisSentinel(sentinels, path[0], int(db), unquote(username) or None, unquote(password) or None)


def _sentinel_address(text: str) -> tuple[str, int]:
    if not text:
        raise ValueError(f"an empty sentinel address (a stray ','?); the form is {SENTINEL_FORM}")
    try:
        address = urlsplit("//" + text)
        host, port = address.hostname, SENTINEL_PORT if address.port is None else address.port
    except ValueError as e:  # a port out of range or not a number, an unclosed '['
        raise ValueError(f"sentinel address {text!r}: {e}") from None
    if not host or not port or address.username is not None or address.path:
        raise ValueError(f"sentinel address {text!r} is not host[:port]")
    return host, port


class Settings(BaseSettings):
    # Inputs stay out of error messages: the Redis URL and the API keys are secrets.
    model_config = SettingsConfigDict(
        env_prefix="EVALSVC_", env_file=None, extra="ignore", hide_input_in_errors=True
    )

    device: str = Field("cpu", description="'cpu' or 'cuda' / 'cuda:N' for this worker")
    data_dir: Path = Field(Path("/var/lib/evalsvc"), description="artifacts, precompiled headers, scratch")
    redis_url: str = Field(
        "redis://127.0.0.1:6379/0",
        description=f"one Redis (redis://, rediss://, unix://), or a primary via Sentinel: {SENTINEL_FORM}",
    )
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

    @field_validator("redis_url")
    @classmethod
    def _known_redis_url(cls, url: str) -> str:
        scheme = urlsplit(url).scheme
        if scheme not in REDIS_SCHEMES:
            raise ValueError(f"scheme {scheme!r} is none of {', '.join(REDIS_SCHEMES)}")
        if scheme == "sentinel":
            parse_sentinel_url(url)
        return url

    @property
    def redis_sentinel(self) -> RedisSentinel | None:
        """The Sentinel deployment `redis_url` names; None for a single Redis."""
        return parse_sentinel_url(self.redis_url) if self.redis_url.startswith("sentinel:") else None

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
