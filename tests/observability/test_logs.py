"""Structured logs: one JSON object per line, with the job's fields while it is handled and not after."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from evalsvc.observability.logs import (
    JsonFormatter,
    TextFormatter,
    current_context,
    log_context,
    setup_logging,
)


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    handler = setup_logging("json", "INFO", worker="w-1", gpu="GPU-abc")
    buf = io.StringIO()
    handler.setStream(buf)  # type: ignore[attr-defined]
    try:
        yield buf
    finally:
        logging.getLogger().removeHandler(handler)


def _docs(buf: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in buf.getvalue().splitlines()]


def test_one_json_line_per_event_with_context(lines: io.StringIO) -> None:
    log = logging.getLogger("evalsvc.test")
    with log_context(evaluation_id="e_1", stage="compile"):
        with log_context(task_id="t_9"):
            log.info("multi\nline %s", "message", extra={"attempt": 2})
        log.warning("after the inner block")
    log.info("outside")
    first, second, third = _docs(lines)
    assert first["message"] == "multi\nline message" and first["level"] == "INFO"
    assert first["evaluation_id"] == "e_1" and first["task_id"] == "t_9" and first["stage"] == "compile"
    assert first["worker"] == "w-1" and first["gpu"] == "GPU-abc" and first["attempt"] == 2
    assert "task_id" not in second and second["evaluation_id"] == "e_1"
    assert "evaluation_id" not in third and third["worker"] == "w-1"
    assert current_context() == {}


def test_exceptions_are_one_line_too(lines: io.StringIO) -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("evalsvc.test").exception("failed")
    (doc,) = _docs(lines)
    assert doc["message"] == "failed" and "ValueError: boom" in doc["exc"]


def test_setup_is_idempotent_and_text_format_names_fields() -> None:
    root = logging.getLogger()
    before = len(root.handlers)
    h1 = setup_logging("json")
    h2 = setup_logging("text")
    try:
        assert len(root.handlers) == before + 1 and h1 not in root.handlers
        assert isinstance(h2.formatter, TextFormatter)
        record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello", None, None)
        with log_context(evaluation_id="e_2"):
            h2.filter(record)
        assert h2.format(record).endswith("hello evaluation_id=e_2")
        assert isinstance(JsonFormatter().format(record), str)
    finally:
        root.removeHandler(h2)
