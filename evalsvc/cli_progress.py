"""Stage-by-stage progress of long local work on stderr (the `evalsvc.progress` log: the one-time header
build, compiling, correctness trials, timing), so that minutes of silence say what they are."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console

PROGRESS = logging.getLogger("evalsvc.progress")


class _StageLines(logging.Handler):
    def __init__(self, console: Console) -> None:
        super().__init__(logging.INFO)
        self.console = console
        self.started = time.monotonic()

    def emit(self, record: logging.LogRecord) -> None:
        elapsed = time.monotonic() - self.started
        self.console.print(f"[{elapsed:6.1f} s] {record.getMessage()}", markup=False, highlight=False)


@contextmanager
def stages_on_stderr(show: bool) -> Iterator[None]:
    """While it lasts, each stage is a line on stderr (when `show`)."""
    if not show:
        yield
        return
    handler = _StageLines(Console(stderr=True))
    PROGRESS.addHandler(handler)
    PROGRESS.setLevel(logging.INFO)
    try:
        yield
    finally:
        PROGRESS.removeHandler(handler)
