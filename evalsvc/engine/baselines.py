"""Baseline timings cached per (task, device, torch, mode, precision): a fleet measures them once."""

from __future__ import annotations

from typing import Protocol

from evalsvc.core.results import TimingStats


class BaselineCache(Protocol):
    def get(self, key: str) -> TimingStats | None: ...

    def put(self, key: str, stats: TimingStats) -> None: ...


class MemoryBaselineCache:
    def __init__(self) -> None:
        self._data: dict[str, TimingStats] = {}

    def get(self, key: str) -> TimingStats | None:
        return self._data.get(key)

    def put(self, key: str, stats: TimingStats) -> None:
        self._data[key] = stats
