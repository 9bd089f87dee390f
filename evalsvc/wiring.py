"""Assemble the engine's adapters from settings. The only place that picks concrete backends."""

from __future__ import annotations

import logging
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from evalsvc.compiler.stage import Compiler, probe_toolchain
from evalsvc.sandbox.base import CompileSandbox, SandboxLimits, SandboxUnavailable
from evalsvc.settings import ArtifactStoreKind, CompileBackend, RunnerIsolation, Settings
from evalsvc.store.artifacts import ArtifactStore, LocalArtifactStore, RedisArtifactStore

if TYPE_CHECKING:
    from evalsvc.store.s3_artifacts import PruneReport, S3ArtifactStore


def make_sandbox(settings: Settings) -> tuple[CompileSandbox, str]:
    """The configured compile sandbox and the python it runs; fails loudly, never falls back."""
    if settings.compile_backend is CompileBackend.DOCKER:
        from evalsvc.sandbox.docker_sandbox import DockerSandbox, host_toolchain_mounts

        docker_sandbox = DockerSandbox(
            owner=sandbox_owner(settings),
            image=settings.compile_image,
            toolchain_mounts=host_toolchain_mounts(),
        )
        docker_sandbox.check()
        docker_sandbox.reap_leftovers()
        sandbox: CompileSandbox = docker_sandbox
        python = "python3"
    else:
        from evalsvc.sandbox.process_sandbox import ProcessSandbox

        sandbox = ProcessSandbox()
        python = sys.executable
    sandbox.check()
    return sandbox, python


def sandbox_owner(settings: Settings) -> str:
    """The owner label of this worker's compile containers (stable across its restarts)."""
    return settings.worker_name or f"{socket.gethostname()}-compile"


def make_store(settings: Settings) -> ArtifactStore:
    if settings.artifact_store == "redis":
        from evalsvc.redis_clients import plain_redis

        return RedisArtifactStore(plain_redis(settings))
    if settings.artifact_store is ArtifactStoreKind.S3:
        return make_s3_store(settings)
    return LocalArtifactStore(settings.artifact_dir)


def make_s3_store(settings: Settings) -> S3ArtifactStore:
    """The S3 artifact store, checked: a missing bucket or refused keys are said now, not at an artifact."""
    from evalsvc.store.s3_artifacts import S3ArtifactStore, s3_client

    key_id, secret = settings.s3_access_key_id, settings.s3_secret_access_key
    client = s3_client(
        settings.s3_endpoint_url,
        settings.s3_region,
        key_id.get_secret_value() if key_id else None,
        secret.get_secret_value() if secret else None,
        settings.s3_timeout_s,
    )
    store = S3ArtifactStore(
        client,
        settings.s3_bucket,
        retention_days=settings.s3_retention_days,
        max_object_bytes=settings.s3_max_object_bytes,
    )
    store.check()
    return store


def prune_artifacts(settings: Settings) -> PruneReport:
    """Remove the artifacts past their retention: the S3 store's, the one that needs it done."""
    if settings.artifact_store is not ArtifactStoreKind.S3:
        raise ValueError(
            f"EVALSVC_ARTIFACT_STORE is {settings.artifact_store.value!r}: only the 's3' store is pruned by "
            "command (Redis expires artifacts by their TTL; a local store is the operator's directory)"
        )
    return make_s3_store(settings).prune()


def _pch_ready(d: Path) -> bool:
    return (d / "torch" / "extension.h.gch").is_file() and (d / "torch" / "extension.h").is_file()


def ensure_pch(sandbox: CompileSandbox, python: str, pch_dir: Path, cuda_home: str) -> None:
    """Build the precompiled torch headers and the fast path's bridge once (trusted commands, the
    sandbox's own toolchain)."""
    from evalsvc.compiler import fast_path
    from evalsvc.compiler.pch import DEFAULT_FLAGSETS, pch_subdir
    from evalsvc.sandbox.base import Mount

    jobs = []
    if not all(_pch_ready(pch_dir / pch_subdir(f)) for f in DEFAULT_FLAGSETS):
        jobs.append(("evalsvc.compiler.pch", "the precompiled torch headers (about 2.3 GB; about 2 minutes)"))
    if not fast_path.ready(pch_dir):
        jobs.append(("evalsvc.compiler.fast_path", "the fast path's bridge to ATen (about 2 minutes)"))
    pch_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(pch_dir, 0o777)
    for module, what in jobs:
        logging.getLogger("evalsvc.progress").info("building %s once, into %s on 2 cores", what, pch_dir)
        run = sandbox.run(
            [python, "-m", module, "/pch"],
            [Mount(pch_dir, "/pch", read_only=False)],
            SandboxLimits(wall_seconds=1800),
            {"CUDA_HOME": cuda_home},
        )
        if run.exit_code != 0:
            raise SandboxUnavailable(f"building {what} failed: {run.output[-2000:]}")


def make_compiler(settings: Settings, store: ArtifactStore, with_pch: bool = True) -> Compiler:
    sandbox, python = make_sandbox(settings)
    toolchain = probe_toolchain(sandbox, python, {"CUDA_HOME": settings.cuda_home})
    if with_pch:
        ensure_pch(sandbox, python, settings.pch_dir, settings.cuda_home)
    limits = SandboxLimits(
        wall_seconds=settings.compile_timeout_s,
        memory_bytes=settings.compile_memory_bytes,
        cpus=settings.compile_cpus,
    )
    return Compiler(
        sandbox,
        store,
        toolchain,
        cuda_arch=settings.cuda_arch,
        limits=limits,
        python=python,
        pch_dir=settings.pch_dir if with_pch else None,
        env={"CUDA_HOME": settings.cuda_home},
    )


def make_evaluator(settings: Settings, store: ArtifactStore, baselines=None):
    """The judge side for one device. Imports torch: call it only in processes that evaluate.

    `baselines` is the baseline cache (the fleet's Redis one on GPU workers); in-memory by default."""
    from evalsvc.engine.baselines import MemoryBaselineCache
    from evalsvc.engine.evaluate import Evaluator
    from evalsvc.engine.judge import Judge
    from evalsvc.engine.launcher import RunnerLauncher, RunnerLimits

    settings.scratch_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(settings.scratch_dir, 0o711)
    isolate = settings.runner_isolation is RunnerIsolation.PROCESS
    if isolate and os.geteuid() != 0:
        raise SandboxUnavailable(
            "runner isolation 'process' needs root to drop privileges and unshare the network; "
            "run as root or set EVALSVC_RUNNER_ISOLATION=none (trusted local use only)"
        )
    launcher = RunnerLauncher(
        settings.device,
        isolate,
        RunnerLimits(
            memory_bytes=settings.runner_memory_bytes, call_timeout_s=settings.runner_call_timeout_s
        ),
        scratch_root=settings.scratch_dir,
        cover=settings.data_dir,
    )
    judge = Judge(
        settings.device,
        launcher,
        baselines if baselines is not None else MemoryBaselineCache(),
        ncu=_ncu_probe(settings, isolate),
    )
    return Evaluator(judge, store, worker=settings.worker_name)


def _ncu_probe(settings: Settings, isolate: bool):
    """Nsight Compute for profiled candidates, where it is enabled, installed and the device is a GPU."""
    from evalsvc.engine.ncu import NcuProbe, find_ncu

    ncu = find_ncu(settings.cuda_home) if settings.profile_ncu and settings.device != "cpu" else None
    if ncu is None:
        return None
    return NcuProbe(ncu, settings.scratch_dir, isolate, settings.runner_memory_bytes)


def make_local_pipeline(settings: Settings, with_pch: bool = True):
    """Compiler + evaluator in one process (the CLI's `eval`)."""
    from evalsvc.engine.evaluate import LocalPipeline

    store = make_store(settings)
    return LocalPipeline(make_compiler(settings, store, with_pch), make_evaluator(settings, store))
