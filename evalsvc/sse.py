"""Server-sent events as the SDK reads them: the text/event-stream framing, and a batch's typed events."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass

from evalsvc.records.documents import BatchEvent, BatchSummary


@dataclass(frozen=True)
class StreamEvent:
    """One event of `GET /v1/batches/{id}/events`: a `result` (an item ended) or the final `done`."""

    kind: str  # "result" or "done"
    cursor: str  # the event's id: pass it back (`last_event_id`) to resume after it
    result: BatchEvent | None = None
    summary: BatchSummary | None = None


class _Frames:
    """Fields of the event being read (the text/event-stream framing: blank line ends an event)."""

    def __init__(self) -> None:
        self.kind, self.cursor, self.data = "message", "", []  # type: tuple[str, str, list[str]]

    def feed(self, line: str) -> StreamEvent | None:
        if line == "":
            event = self._typed()
            self.kind, self.data = "message", []
            return event
        if line.startswith(":"):  # a comment: the server's keep-alive
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self.kind = value
        elif name == "id":
            self.cursor = value
        elif name == "data":
            self.data.append(value)
        return None

    def _typed(self) -> StreamEvent | None:
        data = "\n".join(self.data)
        if self.kind == "result" and data:
            return StreamEvent("result", self.cursor, result=BatchEvent.model_validate_json(data))
        if self.kind == "done" and data:
            return StreamEvent("done", self.cursor, summary=BatchSummary.model_validate_json(data))
        return None  # `retry:` hints, events of kinds this client does not know


def parse(lines: Iterable[str]) -> Iterator[StreamEvent]:
    frames = _Frames()
    for line in lines:
        event = frames.feed(line)
        if event is not None:
            yield event


async def aparse(lines: AsyncIterator[str]) -> AsyncIterator[StreamEvent]:
    frames = _Frames()
    async for line in lines:
        event = frames.feed(line)
        if event is not None:
            yield event
