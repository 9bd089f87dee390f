"""Completions in, one outcome each out: extraction, one batch submission, a long-polled batch, and the
line between the policy's failures (scored) and ours (masked).

Masked, never scored -1: the service's `internal_error` (whatever failed: a worker, the sandbox, a job
abandoned after max_attempts), `cancelled` (someone cancelled the evaluation: no verdict was reached), an
item still unfinished when the client's timeout passes, and a service that stays unreachable or refusing
(429/5xx) after the client's retries. Each masked item is logged.
Other API errors (401, 403, 404 for an unknown task id, 413, 422) are configuration mistakes and raise.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

import httpx
from pydantic import BaseModel
from pydantic_settings import BaseSettings, SettingsConfigDict

from evalsvc.core.options import EvalOptions
from evalsvc.core.results import Status
from evalsvc.core.tasks import TaskSpec
from evalsvc.records.documents import BatchItem, BatchView, EvaluationRequest, State
from evalsvc.rl.extract import Extraction, extract
from evalsvc.sdk import ApiError, AsyncClient, Client, RetryPolicy

log = logging.getLogger("evalsvc.rl")

_TASK_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class Outcome(StrEnum):
    """Statuses beyond the service's own `Status`: ends decided on the client side."""

    FORMAT_ERROR = "format_error"  # no usable code in the completion: the policy's failure
    CLIENT_TIMEOUT = "client_timeout"  # not finished within the client's timeout: masked
    UNREACHABLE = "unreachable"  # no answer from the service after the retries: masked
    REFUSED = "refused"  # still 429/5xx after the retries: masked


class _Env(BaseSettings):
    """Where the service is: EVALSVC_URL and EVALSVC_API_KEY (the client's two settings)."""

    model_config = SettingsConfigDict(env_prefix="EVALSVC_", extra="ignore")
    url: str = "http://127.0.0.1:8000"
    api_key: str | None = None


@dataclass(frozen=True)
class RewardConfig:
    """Everything an adapter needs; `from_env` fills the address and key from the environment."""

    url: str = "http://127.0.0.1:8000"
    api_key: str | None = None
    options: EvalOptions | None = None
    device_class: str = "default"
    timeout_s: float = 900.0  # for the whole call, from submission to the last result
    format_error_reward: float = -1.0
    masked_score: float = 0.0  # what verl/OpenRLHF get for a masked item (TRL gets None)
    max_batch: int = 1024  # the service's max_batch: larger calls are split
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    @classmethod
    def from_env(cls, url: str | None = None, api_key: str | None = None, **kw: object) -> RewardConfig:
        env = _Env()
        return cls(url=url or env.url, api_key=api_key or env.api_key, **kw)  # type: ignore[arg-type]


class Scored(BaseModel):
    """One completion's outcome. `reward` is None exactly when `masked`."""

    status: str
    reward: float | None
    masked: bool = False
    milestone: int | None = None
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    evaluation_id: str | None = None
    message: str | None = None

    @property
    def reached(self) -> int:
        """The milestone, where none was given: -1 (failed), 0 (masked)."""
        if self.milestone is not None:
            return self.milestone
        return 0 if self.masked else -1


def task_request(task: str) -> dict[str, object]:
    """A registered task id (what ids look like), else the task's source."""
    return {"task_id": task} if _TASK_ID.match(task) else {"task": TaskSpec(source=task)}


def _from_item(item: BatchItem) -> Scored:
    if item.state is not State.DONE:
        unfinished = f"not finished within the client's timeout (still {item.state})"
        return _masked(Outcome.CLIENT_TIMEOUT, unfinished, item.id)
    if item.status is Status.INTERNAL_ERROR or item.status is None:
        what = f"internal_error ({item.failure})" if item.failure else "internal_error"
        return _masked(Status.INTERNAL_ERROR, what, item.id)
    if item.status is Status.CANCELLED:
        return _masked(Status.CANCELLED, "cancelled before it ended (no verdict)", item.id)
    return Scored(
        status=item.status.value,
        reward=item.reward,
        milestone=item.milestone,
        speedup_eager=item.speedup_eager,
        speedup_compile=item.speedup_compile,
        evaluation_id=item.id,
    )


def _masked(status: str, message: str, evaluation_id: str | None = None) -> Scored:
    return Scored(status=status, reward=None, masked=True, message=message, evaluation_id=evaluation_id)


def _failed_call(e: Exception) -> Scored:
    """What a whole submission or poll that failed after the retries means for its items."""
    if isinstance(e, httpx.TransportError):
        return _masked(Outcome.UNREACHABLE, f"service unreachable: {type(e).__name__}: {e}")
    if isinstance(e, ApiError) and (e.status in (408, 429) or e.status >= 500):
        return _masked(Outcome.REFUSED, f"service refused: {e}")
    raise e


def _report(scored: list[Scored]) -> list[Scored]:
    masked = [s for s in scored if s.masked]
    if masked:
        counts = Counter(s.status for s in masked)
        log.warning(
            "evalsvc: %d of %d rewards masked (not the policy's fault): %s; first: %s",
            len(masked),
            len(scored),
            dict(counts),
            masked[0].message,
        )
    return scored


@dataclass
class _Plan:
    """The completions split into format errors (decided here) and requests for the service."""

    scored: list[Scored | None]
    requests: list[EvaluationRequest]
    slots: list[int]  # index in `scored` of each request


class Judge:
    """Scores completions for tasks through the service; sync and async."""

    def __init__(self, config: RewardConfig) -> None:
        self.config = config

    def _plan(self, tasks: list[str], completions: list[str]) -> _Plan:
        cfg = self.config
        plan = _Plan(scored=[None] * len(completions), requests=[], slots=[])
        for i, (task, text) in enumerate(zip(tasks, completions, strict=True)):
            got: Extraction = extract(text)
            if got.solution is None:
                plan.scored[i] = Scored(
                    status=Outcome.FORMAT_ERROR, reward=cfg.format_error_reward, message=got.problem
                )
                continue
            plan.requests.append(
                EvaluationRequest(
                    solution=got.solution,
                    options=cfg.options or EvalOptions(),
                    device_class=cfg.device_class,
                    **task_request(task),
                )
            )
            plan.slots.append(i)
        return plan

    def _chunks(self, plan: _Plan) -> list[tuple[list[int], list[EvaluationRequest]]]:
        n = self.config.max_batch
        return [(plan.slots[k : k + n], plan.requests[k : k + n]) for k in range(0, len(plan.requests), n)]

    def _client(self) -> Client:
        c = self.config
        return Client(c.url, c.api_key, retry=c.retry)

    def _async_client(self) -> AsyncClient:
        c = self.config
        return AsyncClient(c.url, c.api_key, retry=c.retry)

    def score(self, tasks: list[str], completions: list[str]) -> list[Scored]:
        """One outcome per completion, in order: one batch submission (per `max_batch`; all submitted
        before any is waited for), each long-polled until done or the call's timeout."""
        plan = self._plan(tasks, completions)
        deadline = time.monotonic() + self.config.timeout_s
        with self._client() as client:
            submitted: list[tuple[list[int], str]] = []
            for slots, reqs in self._chunks(plan):
                try:
                    submitted.append((slots, client.submit_batch(reqs, idempotency_key=_key())))
                except (httpx.TransportError, ApiError) as e:
                    _mask(plan, slots, e)
            for slots, batch_id in submitted:
                try:
                    _fill(plan, slots, client.wait_batch(batch_id, timeout=_left(deadline)))
                except (httpx.TransportError, ApiError) as e:
                    _mask(plan, slots, e)
        return _report([s for s in plan.scored if s is not None])

    async def ascore(self, tasks: list[str], completions: list[str]) -> list[Scored]:
        """`score` for an event loop."""
        plan = self._plan(tasks, completions)
        deadline = time.monotonic() + self.config.timeout_s
        async with self._async_client() as client:
            submitted: list[tuple[list[int], str]] = []
            for slots, reqs in self._chunks(plan):
                try:
                    submitted.append((slots, await client.submit_batch(reqs, idempotency_key=_key())))
                except (httpx.TransportError, ApiError) as e:
                    _mask(plan, slots, e)
            for slots, batch_id in submitted:
                try:
                    _fill(plan, slots, await client.wait_batch(batch_id, timeout=_left(deadline)))
                except (httpx.TransportError, ApiError) as e:
                    _mask(plan, slots, e)
        return _report([s for s in plan.scored if s is not None])


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def _mask(plan: _Plan, slots: list[int], e: Exception) -> None:
    """Every item of a submission or poll that failed after the retries (configuration errors raise)."""
    failed = _failed_call(e)
    for i in slots:
        plan.scored[i] = failed


def _key() -> str:
    return "rl-" + uuid.uuid4().hex


def _fill(plan: _Plan, slots: list[int], view: BatchView) -> None:
    for i, item in zip(slots, view.items, strict=True):
        plan.scored[i] = _from_item(item)
