"""Python SDK over the HTTP API (httpx), sync and async, typed with the service's own models."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx

from evalsvc.core.options import EvalOptions
from evalsvc.core.solutions import Solution
from evalsvc.core.tasks import TaskSpec
from evalsvc.service.records import BatchView, CompileView, EvaluationRequest, EvaluationView, State


class ApiError(RuntimeError):
    """A problem-details answer from the service."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        self.status = status
        self.problem = problem
        self.code = problem.get("code")
        super().__init__(f"{status} {problem.get('code')}: {problem.get('detail') or problem.get('title')}")


def _check(resp: httpx.Response) -> dict[str, Any]:
    if resp.status_code >= 400:
        try:
            body = resp.json()
        except ValueError:
            body = {"detail": resp.text[:500]}
        raise ApiError(resp.status_code, body if isinstance(body, dict) else {"detail": str(body)})
    return resp.json()


def _headers(api_key: str | None, idempotency_key: str | None = None) -> dict[str, str]:
    h = {}
    if api_key:
        h["Authorization"] = f"Bearer {api_key}"
    if idempotency_key:
        h["Idempotency-Key"] = idempotency_key
    return h


def _request(
    task: str | TaskSpec, solution: Solution | str, options: EvalOptions | None, device_class: str
) -> EvaluationRequest:
    sol = Solution.single_file(solution) if isinstance(solution, str) else solution
    kw: dict[str, Any] = {"task_id": task} if isinstance(task, str) else {"task": task}
    return EvaluationRequest(solution=sol, options=options or EvalOptions(), device_class=device_class, **kw)


class Client:
    def __init__(
        self, base_url: str = "http://127.0.0.1:8000", api_key: str | None = None, timeout: float = 30.0
    ) -> None:
        self.api_key = api_key
        self.http = httpx.Client(base_url=base_url, timeout=timeout, headers=_headers(api_key))

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def register_task(self, spec: TaskSpec) -> str:
        return _check(self.http.post("/v1/tasks", json=spec.model_dump(mode="json")))["id"]

    def submit(
        self,
        task: str | TaskSpec,
        solution: Solution | str,
        options: EvalOptions | None = None,
        device_class: str = "default",
        idempotency_key: str | None = None,
    ) -> EvaluationView:
        req = _request(task, solution, options, device_class)
        resp = self.http.post(
            "/v1/evaluations", json=req.model_dump(mode="json"), headers=_headers(None, idempotency_key)
        )
        return EvaluationView.model_validate(_check(resp))

    def get(self, evaluation_id: str, wait: float = 0) -> EvaluationView:
        resp = self.http.get(
            f"/v1/evaluations/{evaluation_id}",
            params={"wait": wait} if wait else None,
            timeout=self.http.timeout.read + wait if self.http.timeout.read else None,
        )
        return EvaluationView.model_validate(_check(resp))

    def wait(self, evaluation_id: str, timeout: float = 600, poll: float = 20) -> EvaluationView:
        """Long-poll until done; back off on 429/503 by the server's Retry-After."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                view = self.get(evaluation_id, wait=max(0.0, min(poll, left)))
            except ApiError as e:
                if e.status not in (429, 503) or left <= 0:
                    raise
                time.sleep(min(5.0, max(0.5, left / 10)))
                continue
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
        body = {"evaluations": [r.model_dump(mode="json") for r in requests]}
        return _check(self.http.post("/v1/batches", json=body, headers=_headers(None, idempotency_key)))["id"]

    def batch(self, batch_id: str, wait: float = 0) -> BatchView:
        resp = self.http.get(
            f"/v1/batches/{batch_id}",
            params={"wait": wait} if wait else None,
            timeout=(self.http.timeout.read or 30) + wait,
        )
        return BatchView.model_validate(_check(resp))

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
        resp = self.http.post(
            "/v1/compile",
            json={"solution": sol.model_dump(mode="json")},
            params={"wait": wait},
            timeout=wait + 30,
        )
        return CompileView.model_validate(_check(resp))


class AsyncClient:
    def __init__(
        self, base_url: str = "http://127.0.0.1:8000", api_key: str | None = None, timeout: float = 30.0
    ) -> None:
        self.http = httpx.AsyncClient(base_url=base_url, timeout=timeout, headers=_headers(api_key))

    async def aclose(self) -> None:
        await self.http.aclose()

    async def submit(
        self,
        task: str | TaskSpec,
        solution: Solution | str,
        options: EvalOptions | None = None,
        device_class: str = "default",
        idempotency_key: str | None = None,
    ) -> EvaluationView:
        req = _request(task, solution, options, device_class)
        resp = await self.http.post(
            "/v1/evaluations", json=req.model_dump(mode="json"), headers=_headers(None, idempotency_key)
        )
        return EvaluationView.model_validate(_check(resp))

    async def wait(self, evaluation_id: str, timeout: float = 600, poll: float = 20) -> EvaluationView:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            resp = await self.http.get(
                f"/v1/evaluations/{evaluation_id}",
                params={"wait": max(0.0, min(poll, left))},
                timeout=poll + 30,
            )
            if resp.status_code in (429, 503) and left > 0:
                await asyncio.sleep(1.0)
                continue
            view = EvaluationView.model_validate(_check(resp))
            if view.state is State.DONE or left <= 0:
                return view

    async def as_completed(self, ids: list[str], timeout: float = 3600) -> AsyncIterator[EvaluationView]:
        tasks = [asyncio.ensure_future(self.wait(i, timeout)) for i in ids]
        for fut in asyncio.as_completed(tasks):
            yield await fut


def make_reward_fn(base_url: str, api_key: str | None = None, timeout: float = 900):
    """A reward function for RL frameworks: (task source, solution text) -> (reward, result document)."""
    client = Client(base_url, api_key)

    def reward(task_source: str, solution_text: str) -> tuple[float, dict[str, Any]]:
        view = client.evaluate(TaskSpec(source=task_source), solution_text, timeout=timeout)
        doc = view.result.model_dump(mode="json") if view.result else {}
        return (view.reward if view.reward is not None else -1.0), doc

    return reward
