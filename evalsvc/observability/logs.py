"""Structured logs: one JSON object per line, carrying the evaluation, task, stage, worker and GPU in force.

Fields that hold for a whole process (worker, GPU) are given once to `setup_logging`; fields of the job at
hand are set around it with `log_context`, a contextvar, so they follow the code that logs without being
passed down (and never leak into the next job of a long-lived worker).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from types import MappingProxyType

FIELDS = ("evaluation_id", "task_id", "stage", "worker", "gpu")

_context: ContextVar[Mapping[str, str]] = ContextVar("evalsvc_log_context", default=MappingProxyType({}))
_HANDLER_MARK = "_evalsvc_handler"
# What every LogRecord has; anything else on a record came from `extra=` and is logged as a field.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


@contextmanager
def log_context(**fields: str | None) -> Iterator[None]:
    """Adds fields (None ones are skipped) to every record logged inside the block, in this context."""
    token = _context.set({**_context.get(), **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _context.reset(token)


def current_context() -> dict[str, str]:
    return dict(_context.get())


class ContextFilter(logging.Filter):
    """Puts the process's fixed fields and the current context's fields on each record."""

    def __init__(self, static: Mapping[str, str | None]) -> None:
        super().__init__()
        self.static = {k: v for k, v in static.items() if v is not None}

    def filter(self, record: logging.LogRecord) -> bool:
        fields = {**self.static, **_context.get()}
        record.evalsvc_fields = fields
        return True


class JsonFormatter(logging.Formatter):
    """One line per event; keys are stable so log pipelines can index them."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
        }
        doc.update(getattr(record, "evalsvc_fields", {}))
        for key, value in vars(record).items():
            if key not in _STANDARD and key != "evalsvc_fields" and key not in doc:
                doc[key] = value
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """For a terminal: the usual line, with the known fields appended as key=value."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = getattr(record, "evalsvc_fields", {})
        return line + "".join(f" {k}={fields[k]}" for k in FIELDS if k in fields)


def setup_logging(
    fmt: str = "json", level: str = "INFO", *, worker: str | None = None, gpu: str | None = None
) -> logging.Handler:
    """Install the one root handler (stderr). Idempotent: a second call replaces the first handler."""
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, _HANDLER_MARK, False):
            root.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    setattr(handler, _HANDLER_MARK, True)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(ContextFilter({"worker": worker, "gpu": gpu}))
    root.addHandler(handler)
    root.setLevel(level.upper())
    return handler
