"""A live stack for the RL adapters: redis-server, the uvicorn gateway, one Celery compile worker (Docker
sandbox) and one CPU-device worker; nothing faked. The same approach as tests/integration's end-to-end
stack, smaller: one device worker, one compile slot."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.live_stack import LiveStack, running_stack

DEVICE = "rl-cpu"


@pytest.fixture(scope="package")
def stack(cpu_settings) -> Iterator[LiveStack]:  # type: ignore[no-untyped-def]
    with running_stack("evalsvc-rl-", {DEVICE: "gpu.rl-cpu"}, 1) as s:
        yield s


@pytest.fixture
def stopped_device_worker(stack: LiveStack) -> Iterator[LiveStack]:
    """The stack with its only device worker stopped; started again afterwards."""
    stack.stop_one(DEVICE)
    try:
        yield stack
    finally:
        stack.spawn_device_worker(DEVICE)
