"""Python SDK over the HTTP API (httpx), sync and async, typed with the service's own models.

Every request is retried (tenacity) on a refused or unreachable service: 429 and 502/503/504, waiting
what the answer's Retry-After says, and transport errors, with exponential backoff and jitter; within a
`RetryPolicy`'s attempts and seconds. Submissions carry an Idempotency-Key, so a retried POST does not
queue the work twice."""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential_jitter,
)

from evalsvc.core.options import EvalOptions
from evalsvc.core.solutions import Solution
from evalsvc.core.tasks import TaskSpec
from evalsvc.records.documents import (
    BatchCancellation,
    BatchView,
    CompileView,
    EvaluationRequest,
    EvaluationView,
    State,
)
from evalsvc.sse import StreamEvent, aparse, parse

log = logging.getLogger(__name__)


class ApiError(RuntimeError):
    """A problem-details answer from the service."""

    def __init__(self, status: int, problem: dict[str, Any], retry_after: float | None = None) -> None:
        self.status = status
        self.problem = problem
        self.code = problem.get("code")
        self.retry_after = retry_after
        super().__init__(f"{status} {problem.get('code')}: {problem.get('detail') or problem.get('title')}")


@dataclass(frozen=True)
class RetryPolicy:
    """How long a request is retried while the service refuses it (429/5xx) or cannot be reached. A 429
    says when to come back, so it is retried until `total_s` (its wait spread over up to twice the
    server's Retry-After, so that a thousand clients told "1 s" do not all return in the same
    millisecond: they did, and most exhausted 8 attempts against a 50/s limit); other failures at most
    `attempts` times."""

    attempts: int = 8
    total_s: float = 300.0
    max_wait_s: float = 60.0
    statuses: frozenset[int] = frozenset({429, 502, 503, 504})

    def retryable(self, exc: BaseException) -> bool:
        return isinstance(exc, httpx.TransportError) or (
            isinstance(exc, ApiError) and exc.status in self.statuses
        )

    def wait(self, state: RetryCallState) -> float:
        """The server's Retry-After where it gave one, else exponential backoff with jitter."""
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, ApiError) and exc.retry_after is not None:
            return min(exc.retry_after * (1 + random.random()), self.max_wait_s)
        return float(wait_exponential_jitter(initial=0.5, max=self.max_wait_s)(state))

    def stop(self, state: RetryCallState) -> bool:
        exc = state.outcome.exception() if state.outcome else None
        told_to_wait = isinstance(exc, ApiError) and exc.status == 429
        return stop_after_delay(self.total_s)(state) or (
            not told_to_wait and stop_after_attempt(self.attempts)(state)
        )

    def tenacity(self) -> dict[str, Any]:
        return {
            "retry": retry_if_exception(self.retryable),
            "stop": self.stop,
            "wait": self.wait,
            "reraise": True,
            "before_sleep": _log_retry,
        }


def _log_retry(state: RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome else None
    wait = state.next_action.sleep if state.next_action else 0.0
    log.warning("evalsvc request failed (%s); retry %d in %.1fs", exc, state.attempt_number, wait)


def _retry_after(resp: httpx.Response) -> float | None:
    """Retry-After in seconds (delta-seconds or an HTTP date), None when absent or unreadable."""
    value = resp.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _check(resp: httpx.Response) -> dict[str, Any]:
    if resp.status_code >= 400:
        try:
            body = resp.json()
        except ValueError:
            body = {"detail": resp.text[:500]}
        problem = body if isinstance(body, dict) else {"detail": str(body)}
        raise ApiError(resp.status_code, problem, _retry_after(resp))
    return resp.json()


def _headers(api_key: str | None, idempotency_key: str | None = None) -> dict[str, str]:
    h = {}
    if api_key:
        h["Authorization"] = f"Bearer {api_key}"
    if idempotency_key:
        h["Idempotency-Key"] = idempotency_key
    return h


def _new_key() -> str:
    return "k-" + uuid.uuid4().hex


def _request(
    task: str | TaskSpec, solution: Solution | str, options: EvalOptions | None, device_class: str
) -> EvaluationRequest:
    sol = Solution.single_file(solution) if isinstance(solution, str) else solution
    kw: dict[str, Any] = {"task_id": task} if isinstance(task, str) else {"task": task}
    return EvaluationRequest(solution=sol, options=options or EvalOptions(), device_class=device_class, **kw)


def _wait_params(wait: float) -> dict[str, float] | None:
    return {"wait": wait} if wait else None


def _batch_body(requests: list[EvaluationRequest]) -> dict[str, Any]:
    return {"evaluations": [r.model_dump(mode="json") for r in requests]}


class Client:
    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        api_key: str | None = None,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.api_key = api_key
        self.retry = retry or RetryPolicy()
        self.http = httpx.Client(base_url=base_url, timeout=timeout, headers=_headers(api_key))

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        for attempt in Retrying(**self.retry.tenacity()):
            with attempt:
                return _check(self.http.request(method, path, **kw))
        raise AssertionError("unreachable: tenacity reraises")  # pragma: no cover

    def _long_timeout(self, wait: float) -> float:
        return (self.http.timeout.read or 30.0) + wait

    def register_task(self, spec: TaskSpec) -> str:
        return self._call("POST", "/v1/tasks", json=spec.model_dump(mode="json"))["id"]

    def submit(
        self,
        task: str | TaskSpec,
        solution: Solution | str,
        options: EvalOptions | None = None,
        device_class: str = "default",
        idempotency_key: str | None = None,
    ) -> EvaluationView:
        req = _request(task, solution, options, device_class)
        body = self._call(
            "POST",
            "/v1/evaluations",
            json=req.model_dump(mode="json"),
            headers=_headers(None, idempotency_key or _new_key()),
        )
        return EvaluationView.model_validate(body)

    def get(self, evaluation_id: str, wait: float = 0) -> EvaluationView:
        body = self._call(
            "GET",
            f"/v1/evaluations/{evaluation_id}",
            params=_wait_params(wait),
            timeout=self._long_timeout(wait),
        )
        return EvaluationView.model_validate(body)

    def wait(self, evaluation_id: str, timeout: float = 600, poll: float = 20) -> EvaluationView:
        """Long-poll until done or `timeout` (then the unfinished view); refusals are retried in `get`."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            view = self.get(evaluation_id, wait=max(0.0, min(poll, left)))
            if view.state is State.DONE or left <= 0:
                return view

    def evaluate(
        self,
        task: str | TaskSpec,
        solution: Solution | str,
        options: EvalOptions | None = None,
        timeout: float = 600,
        **kw: Any,
    ) -> EvaluationView:
        return self.wait(self.submit(task, solution, options, **kw).id, timeout)

    def submit_batch(self, requests: list[EvaluationRequest], idempotency_key: str | None = None) -> str:
        headers = _headers(None, idempotency_key or _new_key())
        return self._call("POST", "/v1/batches", json=_batch_body(requests), headers=headers)["id"]

    def batch(self, batch_id: str, wait: float = 0) -> BatchView:
        body = self._call(
            "GET", f"/v1/batches/{batch_id}", params=_wait_params(wait), timeout=self._long_timeout(wait)
        )
        return BatchView.model_validate(body)

    def wait_batch(self, batch_id: str, timeout: float = 3600, poll: float = 30) -> BatchView:
        """Long-poll the batch (one request per `poll` seconds, not one per item) until every item is
        done or `timeout` passed; then the view as it stands."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            view = self.batch(batch_id, wait=max(0.0, min(poll, left)))
            if view.done >= view.total or left <= 0:
                return view

    def cancel(self, evaluation_id: str) -> EvaluationView:
        """Cancel an unfinished evaluation (it ends `cancelled`, no reward); again: the same answer. A
        finished one raises `ApiError` 409 `already_finished`."""
        return EvaluationView.model_validate(self._call("DELETE", f"/v1/evaluations/{evaluation_id}"))

    def cancel_batch(self, batch_id: str) -> BatchCancellation:
        """Cancel every unfinished item of a batch; finished items keep their results."""
        return BatchCancellation.model_validate(self._call("DELETE", f"/v1/batches/{batch_id}"))

    def stream_batch(
        self, batch_id: str, last_event_id: str | None = None, idle_timeout: float = 60
    ) -> Iterator[StreamEvent]:
        """The batch's results as they finish (server-sent events), then its `done` event. A dropped
        connection is resumed where it stopped (`Last-Event-ID`) within the retry policy."""
        cursor = last_event_id
        for attempt in Retrying(**self.retry.tenacity()):
            with attempt:
                for event in self._stream_once(batch_id, cursor, idle_timeout):
                    cursor = event.cursor
                    yield event
                    if event.kind == "done":
                        return
                raise httpx.RemoteProtocolError("the event stream ended before its done event")

    def _stream_once(self, batch_id: str, cursor: str | None, idle_timeout: float) -> Iterator[StreamEvent]:
        headers = {"Accept": "text/event-stream", **({"Last-Event-ID": cursor} if cursor else {})}
        timeout = httpx.Timeout(self.http.timeout.connect, read=idle_timeout)
        path = f"/v1/batches/{batch_id}/events"
        with self.http.stream("GET", path, headers=headers, timeout=timeout) as resp:
            if resp.status_code >= 400:
                resp.read()
                _check(resp)
            yield from parse(resp.iter_lines())

    def iter_results(self, ids: list[str], timeout: float = 3600) -> Iterator[EvaluationView]:
        """Yield each evaluation as it finishes (not in submission order)."""
        pending = list(ids)
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            still = []
            for i in pending:
                view = self.get(i)
                if view.state is State.DONE:
                    yield view
                else:
                    still.append(i)
            pending = still
            if pending:
                time.sleep(0.25)

    def compile(self, solution: Solution | str, wait: float = 120) -> CompileView:
        sol = Solution.single_file(solution) if isinstance(solution, str) else solution
        body = self._call(
            "POST",
            "/v1/compile",
            json={"solution": sol.model_dump(mode="json")},
            params={"wait": wait},
            timeout=wait + 30,
        )
        return CompileView.model_validate(body)


class AsyncClient:
    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        api_key: str | None = None,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.retry = retry or RetryPolicy()
        self.http = httpx.AsyncClient(base_url=base_url, timeout=timeout, headers=_headers(api_key))

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _call(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        async for attempt in AsyncRetrying(**self.retry.tenacity()):
            with attempt:
                return _check(await self.http.request(method, path, **kw))
        raise AssertionError("unreachable: tenacity reraises")  # pragma: no cover

    def _long_timeout(self, wait: float) -> float:
        return (self.http.timeout.read or 30.0) + wait

    async def register_task(self, spec: TaskSpec) -> str:
        return (await self._call("POST", "/v1/tasks", json=spec.model_dump(mode="json")))["id"]

    async def submit(
        self,
        task: str | TaskSpec,
        solution: Solution | str,
        options: EvalOptions | None = None,
        device_class: str = "default",
        idempotency_key: str | None = None,
    ) -> EvaluationView:
        req = _request(task, solution, options, device_class)
        body = await self._call(
            "POST",
            "/v1/evaluations",
            json=req.model_dump(mode="json"),
            headers=_headers(None, idempotency_key or _new_key()),
        )
        return EvaluationView.model_validate(body)

    async def get(self, evaluation_id: str, wait: float = 0) -> EvaluationView:
        body = await self._call(
            "GET",
            f"/v1/evaluations/{evaluation_id}",
            params=_wait_params(wait),
            timeout=self._long_timeout(wait),
        )
        return EvaluationView.model_validate(body)

    async def wait(self, evaluation_id: str, timeout: float = 600, poll: float = 20) -> EvaluationView:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            view = await self.get(evaluation_id, wait=max(0.0, min(poll, left)))
            if view.state is State.DONE or left <= 0:
                return view

    async def submit_batch(
        self, requests: list[EvaluationRequest], idempotency_key: str | None = None
    ) -> str:
        headers = _headers(None, idempotency_key or _new_key())
        return (await self._call("POST", "/v1/batches", json=_batch_body(requests), headers=headers))["id"]

    async def batch(self, batch_id: str, wait: float = 0) -> BatchView:
        body = await self._call(
            "GET", f"/v1/batches/{batch_id}", params=_wait_params(wait), timeout=self._long_timeout(wait)
        )
        return BatchView.model_validate(body)

    async def wait_batch(self, batch_id: str, timeout: float = 3600, poll: float = 30) -> BatchView:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            view = await self.batch(batch_id, wait=max(0.0, min(poll, left)))
            if view.done >= view.total or left <= 0:
                return view

    async def cancel(self, evaluation_id: str) -> EvaluationView:
        """See `Client.cancel`."""
        return EvaluationView.model_validate(await self._call("DELETE", f"/v1/evaluations/{evaluation_id}"))

    async def cancel_batch(self, batch_id: str) -> BatchCancellation:
        """See `Client.cancel_batch`."""
        return BatchCancellation.model_validate(await self._call("DELETE", f"/v1/batches/{batch_id}"))

    async def stream_batch(
        self, batch_id: str, last_event_id: str | None = None, idle_timeout: float = 60
    ) -> AsyncIterator[StreamEvent]:
        """See `Client.stream_batch`."""
        cursor = last_event_id
        async for attempt in AsyncRetrying(**self.retry.tenacity()):
            with attempt:
                async for event in self._stream_once(batch_id, cursor, idle_timeout):
                    cursor = event.cursor
                    yield event
                    if event.kind == "done":
                        return
                raise httpx.RemoteProtocolError("the event stream ended before its done event")

    async def _stream_once(
        self, batch_id: str, cursor: str | None, idle_timeout: float
    ) -> AsyncIterator[StreamEvent]:
        headers = {"Accept": "text/event-stream", **({"Last-Event-ID": cursor} if cursor else {})}
        timeout = httpx.Timeout(self.http.timeout.connect, read=idle_timeout)
        path = f"/v1/batches/{batch_id}/events"
        async with self.http.stream("GET", path, headers=headers, timeout=timeout) as resp:
            if resp.status_code >= 400:
                await resp.aread()
                _check(resp)
            async for event in aparse(resp.aiter_lines()):
                yield event

    async def as_completed(self, ids: list[str], timeout: float = 3600) -> AsyncIterator[EvaluationView]:
        tasks = [asyncio.ensure_future(self.wait(i, timeout)) for i in ids]
        for fut in asyncio.as_completed(tasks):
            yield await fut
