"""Shared fixtures: real services only. Docker is required where EVALSVC_REQUIRE_DOCKER=1 (CI)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evalsvc.settings import Settings

TEST_DATA = Path(os.environ.get("EVALSVC_TEST_DATA", "/var/tmp/evalsvc-test"))


def _docker_reason() -> str | None:
    try:
        import docker

        client = docker.from_env(timeout=5)
        client.ping()
        client.images.get(Settings().compile_image)
    except Exception as e:
        return f"no Docker engine or compile image ({type(e).__name__}: {e}); run docker/ensure-docker.sh"
    return None


@pytest.fixture(scope="session")
def docker_ready() -> None:
    reason = _docker_reason()
    if reason:
        if os.environ.get("EVALSVC_REQUIRE_DOCKER") == "1":
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def cpu_settings(docker_ready: None) -> Settings:
    TEST_DATA.mkdir(parents=True, exist_ok=True)
    return Settings(
        device="cpu",
        data_dir=TEST_DATA,
        compile_backend="docker",
        compile_timeout_s=600,
        runner_isolation="process" if os.geteuid() == 0 else "none",
    )


@pytest.fixture(scope="session")
def pipeline(cpu_settings: Settings):  # type: ignore[no-untyped-def]
    from evalsvc.wiring import make_local_pipeline

    return make_local_pipeline(cpu_settings)
