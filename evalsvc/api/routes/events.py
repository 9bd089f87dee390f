"""GET /v1/batches/{id}/events: a batch's results pushed as they finish (server-sent events).

No polling per client: every write that ends a job publishes its id (`records.keys.finished_channel`), and
a stream subscribes to the channels of its batch's unfinished items *before* reading them, so a result
written between the read and the subscription is not missed. Pub/sub is at most once (a message sent
while the gateway's connection is being re-made is lost), so each idle `event_heartbeat_s` the stream also
re-reads its unfinished items, with its keep-alive comment.

Events: `result` (one per item, when it reaches `done`; data `BatchEvent`), then `done` (data
`BatchSummary`), then the stream ends. Every event's `id` is a cursor naming all the items sent so far
(a bitmap of their indices, base64url): a client that reconnects with it as `Last-Event-ID` is sent
every item not yet named, in whatever order they finished, then `done`. Items finish in any order, so
an index alone could not say which earlier ones a client has.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from typing import Annotated, Any

import anyio
import redis.asyncio
from anyio import to_thread
from fastapi import APIRouter, Depends, Header
from fastapi.responses import StreamingResponse

from evalsvc.api.deps import (
    AsyncRedisDep,
    BatchesDep,
    JobIdPath,
    JobsDep,
    PrincipalDep,
    SettingsDep,
    current_principal,
)
from evalsvc.api.lookup import owned_batch
from evalsvc.api.problems import ProblemError, problem_responses
from evalsvc.api.views import batch_item
from evalsvc.records.documents import BatchEvent, BatchSummary, BrokenJob, Job, State
from evalsvc.records.jobs import JobStore
from evalsvc.records.keys import finished_channel

router = APIRouter(prefix="/v1/batches", tags=["batches"], dependencies=[Depends(current_principal)])

RETRY_MS = 3000  # the reconnection delay suggested to clients (`retry:`)

LastEventId = Annotated[
    str | None,
    Header(
        alias="Last-Event-ID",
        max_length=2048,
        description="resume: the `id` of the last event received; items it names are not sent again",
    ),
]

_STREAM_DOC = (
    "`text/event-stream`: `result` events (data: `BatchEvent`) as items reach `done`, a `done` event "
    "(data: `BatchSummary`), keep-alive comments while idle. Each event's `id` is a cursor for "
    "`Last-Event-ID`."
)


@router.get(
    "/{batch_id}/events",
    name="batch_events",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"text/event-stream": {"schema": {"type": "string"}}}, "description": _STREAM_DOC},
        **problem_responses(400, 401, 404, 422, 429, 503),
    },
)
async def batch_events(
    batch_id: JobIdPath,
    principal: PrincipalDep,
    jobs: JobsDep,
    batches: BatchesDep,
    aredis: AsyncRedisDep,
    settings: SettingsDep,
    last_event_id: LastEventId = None,
) -> StreamingResponse:
    """The batch's results as they finish, then `done` (server-sent events); resumable by `Last-Event-ID`."""
    members = await to_thread.run_sync(owned_batch, batches, jobs, batch_id, principal.tenant)
    sent = decode_cursor(last_event_id, len(members)) if last_event_id else set()
    stream = BatchStream(batch_id, [j.id for j in members], sent, jobs, aredis, settings.event_heartbeat_s)
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}  # nginx: do not buffer the stream
    return StreamingResponse(stream.events(), media_type="text/event-stream", headers=headers)


def event_schemas() -> dict[str, Any]:
    """The JSON schemas of the events' data, for the OpenAPI document (no route returns them as JSON)."""
    out: dict[str, Any] = {}
    for model in (BatchEvent, BatchSummary):
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        out.update(schema.pop("$defs", {}))
        out[model.__name__] = schema
    return out


def encode_cursor(sent: Iterable[int], total: int) -> str:
    bits = bytearray((total + 7) // 8)
    for i in sent:
        bits[i // 8] |= 1 << (i % 8)
    return base64.urlsafe_b64encode(bytes(bits)).decode().rstrip("=")


def decode_cursor(cursor: str, total: int) -> set[int]:
    """The item indices a cursor names; 400 when it is not a cursor of a batch of `total` items."""
    try:
        bits = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except (binascii.Error, ValueError):
        bits = b""
    sent = {i for i in range(len(bits) * 8) if bits[i // 8] >> (i % 8) & 1}
    if len(bits) != (total + 7) // 8 or any(i >= total for i in sent) or encode_cursor(sent, total) != cursor:
        raise ProblemError(400, "bad_last_event_id", "Last-Event-ID is not a cursor of this batch's events")
    return sent


def _event(kind: str, cursor: str, data: str) -> str:
    return f"id: {cursor}\nevent: {kind}\ndata: {data}\n\n"


class BatchStream:
    """One client's event stream over one batch: subscribe, read, emit; re-read on each heartbeat."""

    def __init__(
        self,
        batch_id: str,
        job_ids: list[str],
        sent: set[int],
        jobs: JobStore,
        aredis: redis.asyncio.Redis,
        heartbeat_s: float,
    ) -> None:
        self.batch_id = batch_id
        self.job_ids = job_ids
        self.sent = set(sent)
        self.jobs = jobs
        self.aredis = aredis
        self.heartbeat_s = heartbeat_s
        self.gone = False  # an item's record expired under the stream: it ends without `done` (GET: 404)
        self.indices: dict[str, list[int]] = {}  # items that share a job (duplicates) share its end
        for i, j in enumerate(job_ids):
            if i not in self.sent:
                self.indices.setdefault(j, []).append(i)

    async def events(self) -> AsyncIterator[str]:
        pubsub = self.aredis.pubsub()
        try:
            if self.indices:
                await pubsub.subscribe(*[finished_channel(j) for j in self.indices])
            yield f"retry: {RETRY_MS}\n\n"
            async for chunk in self._read(list(self.indices)):
                yield chunk
            sweep_at = time.monotonic() + self.heartbeat_s
            while self.indices:
                wait = max(0.0, sweep_at - time.monotonic())
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=wait)
                if message is None and time.monotonic() >= sweep_at:
                    yield ": keep-alive\n\n"
                    sweep_at = time.monotonic() + self.heartbeat_s
                    ids = list(self.indices)  # a lost notification is found here
                else:
                    ids = await self._announced(pubsub, message)
                async for chunk in self._read(ids):
                    yield chunk
            if not self.gone:
                yield await self._done()
        finally:
            with anyio.CancelScope(shield=True):  # a client hanging up cancels us: still let go of Redis
                await pubsub.aclose()

    async def _announced(self, pubsub: redis.asyncio.client.PubSub, first: dict | None) -> list[str]:
        """The job ids announced: `first` and whatever else has arrived already (not waited for)."""
        ids = []
        message = first
        while message is not None:
            data = message.get("data")
            if isinstance(data, bytes):
                ids.append(data.decode(errors="replace"))
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=0)
        return [j for j in dict.fromkeys(ids) if j in self.indices]

    async def _read(self, ids: list[str]) -> AsyncIterator[str]:
        """Emit the items of every job of `ids` that is done."""
        if not ids:
            return
        jobs = await to_thread.run_sync(self.jobs.get_jobs, ids)
        for job in jobs:
            if job is None:
                self.gone = True
                self.indices.clear()
                return
            if job.state is State.DONE:
                for chunk in self._emit(job):
                    yield chunk

    def _emit(self, job: Job | BrokenJob) -> list[str]:
        out = []
        item = batch_item(job)
        for i in self.indices.pop(job.id, []):
            self.sent.add(i)
            data = BatchEvent(index=i, item=item, href=f"/v1/evaluations/{job.id}")
            out.append(_event("result", encode_cursor(self.sent, len(self.job_ids)), data.model_dump_json()))
        return out

    async def _done(self) -> str:
        jobs = await to_thread.run_sync(self.jobs.get_jobs, self.job_ids)
        statuses = Counter(
            j.result.status.value if j is not None and j.result is not None else "unknown" for j in jobs
        )
        summary = BatchSummary(id=self.batch_id, total=len(jobs), done=len(jobs), statuses=dict(statuses))
        return _event(
            "done", encode_cursor(range(len(self.job_ids)), len(self.job_ids)), summary.model_dump_json()
        )
