"""Long-polling without blocking the event loop: sync Redis reads run in worker threads between sleeps."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from anyio import sleep, to_thread
from fastapi import Request

T = TypeVar("T")


@dataclass(frozen=True)
class PollPolicy:
    """Poll fast at first (short jobs answer within ~50 ms), then back off to spare Redis."""

    first_s: float = 0.05
    max_s: float = 0.25
    growth: float = 1.2


async def poll_until(
    fetch: Callable[[], T],
    done: Callable[[T], bool],
    wait_s: float,
    request: Request,
    policy: PollPolicy = PollPolicy(),
) -> T:
    """`fetch()` until `done`, the deadline, or the client hanging up; returns the last value."""
    deadline = time.monotonic() + wait_s
    value = await to_thread.run_sync(fetch)
    delay = policy.first_s
    while not done(value):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or await request.is_disconnected():
            break
        await sleep(min(delay, remaining))
        delay = min(delay * policy.growth, policy.max_s)
        value = await to_thread.run_sync(fetch)
    return value
