"""A live stack for the RL adapters: redis-server, the uvicorn gateway, one Celery compile worker (Docker
sandbox) and one CPU-device worker; nothing faked. The same approach as tests/integration's end-to-end
stack, smaller: one device worker, one compile slot."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live_stack import LiveStack

DEVICE = "rl-cpu"


@pytest.fixture(scope="package")
def stack(cpu_settings) -> Iterator[LiveStack]:  # type: ignore[no-untyped-def]
    root = Path(tempfile.mkdtemp(prefix="evalsvc-rl-"))
    s = LiveStack(root, {DEVICE: "gpu.rl-cpu"}, compile_concurrency=1)
    try:
        s.start()
        yield s
    finally:
        s.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def stopped_device_worker(stack: LiveStack) -> Iterator[LiveStack]:
    """The stack with its only device worker stopped; started again afterwards."""
    stack.stop_one(DEVICE)
    try:
        yield stack
    finally:
        stack.spawn_device_worker(DEVICE)
