"""What each end of an evaluation scores in the adapters, and the SDK's retry policy: pure, no service,
except one real local HTTP server that refuses with 429 and Retry-After before answering."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from tenacity import RetryCallState

from evalsvc.core.results import FailureKind, Status
from evalsvc.records.documents import BatchItem, State
from evalsvc.rl.judge import RewardConfig, Scored, _failed_call, _from_item
from evalsvc.rl.openrlhf import scored_answer
from evalsvc.rl.verl import as_verl
from evalsvc.sdk import ApiError, Client, RetryPolicy


def item(state: State = State.DONE, **kw: object) -> BatchItem:
    return BatchItem(id="e_1", state=state, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("failure", [None, FailureKind.JOB_ABANDONED, FailureKind.SANDBOX_UNAVAILABLE])
def test_internal_error_is_masked(failure: FailureKind | None) -> None:
    s = _from_item(item(status=Status.INTERNAL_ERROR, failure=failure, reward=-1.0))
    assert s.masked and s.reward is None and s.status == "internal_error"
    assert as_verl(s, RewardConfig())["score"] == 0.0
    assert as_verl(s, RewardConfig(masked_score=0.25))["score"] == 0.25


def test_cancelled_is_masked() -> None:
    """A cancelled evaluation reached no verdict: not the policy's failure, and no reward."""
    s = _from_item(item(status=Status.CANCELLED, reward=None))
    assert s.masked and s.reward is None and s.status == "cancelled"
    assert as_verl(s, RewardConfig())["score"] == 0.0 and as_verl(s, RewardConfig())["masked"]


def test_unfinished_item_is_a_masked_client_timeout() -> None:
    s = _from_item(item(State.RUNNING))
    assert s.masked and s.status == "client_timeout" and s.reward is None


@pytest.mark.parametrize("status", [Status.INCORRECT, Status.COMPILE_ERROR, Status.TIMEOUT, Status.FORBIDDEN])
def test_the_policys_failures_are_scored(status: Status) -> None:
    s = _from_item(item(status=status, reward=-1.0, milestone=-1))
    assert not s.masked and s.reward == -1.0
    assert as_verl(s, RewardConfig())["score"] == -1.0


def test_ok_carries_milestone_and_speedups() -> None:
    s = _from_item(item(status=Status.OK, reward=2.0, milestone=2, speedup_eager=1.4, speedup_compile=0.9))
    d = as_verl(s, RewardConfig())
    assert (d["score"], d["milestone"], d["speedup_eager"], d["speedup_compile"]) == (2.0, 2, 1.4, 0.9)


def test_failed_calls() -> None:
    assert _failed_call(httpx.ConnectError("refused")).status == "unreachable"
    assert _failed_call(ApiError(503, {"code": "queue_full"})).status == "refused"
    assert _failed_call(ApiError(429, {"code": "rate_limited"})).masked
    with pytest.raises(ApiError):  # a configuration mistake is loud, not a silent reward
        _failed_call(ApiError(404, {"code": "task_not_found"}))


def test_openrlhf_answer_without_masking_surprises() -> None:
    scored = [
        Scored(status="ok", reward=3.0, milestone=3),
        Scored(status="unreachable", reward=None, masked=True),
    ]
    out = scored_answer(scored, RewardConfig())
    assert scored_answer(scored, RewardConfig(), as_tensors=False)["rewards"] == [3.0, 0.0]
    assert out["rewards"].tolist() == [3.0, 0.0] and out["extra_logs"]["milestone"].tolist() == [3.0, 0.0]


def _state_after(exc: BaseException) -> RetryCallState:
    state = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})  # type: ignore[arg-type]
    state.set_exception((type(exc), exc, None))
    return state


def test_retry_after_is_honoured_and_capped() -> None:
    policy = RetryPolicy(max_wait_s=10)
    assert 3.0 <= policy.wait(_state_after(ApiError(429, {}, retry_after=3.0))) <= 6.0  # spread, 1-2x
    assert policy.wait(_state_after(ApiError(503, {}, retry_after=600.0))) == 10
    assert policy.retryable(ApiError(429, {})) and policy.retryable(httpx.ReadTimeout("slow"))
    assert not policy.retryable(ApiError(422, {}))


class _Refusing(BaseHTTPRequestHandler):
    """429 with Retry-After for the first two requests, then a batch view."""

    seen: list[str] = []

    def do_GET(self) -> None:
        self.seen.append(self.path)
        if len(self.seen) <= 2:
            body, code, headers = {"code": "rate_limited"}, 429, {"Retry-After": "0"}
        else:
            body, code, headers = {"id": "b_1", "total": 0, "done": 0, "items": []}, 200, {}
        data = json.dumps(body).encode()
        self.send_response(code)
        for k, v in {**headers, "Content-Type": "application/json", "Content-Length": str(len(data))}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def refusing_server() -> Iterator[str]:
    _Refusing.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_client_retries_429_by_retry_after(refusing_server: str) -> None:
    with Client(refusing_server, retry=RetryPolicy(attempts=3, max_wait_s=1)) as client:
        view = client.batch("b_1")
    assert view.id == "b_1" and len(_Refusing.seen) == 3


def test_client_gives_up_on_429_when_its_time_is_spent(refusing_server: str) -> None:
    """A 429 is retried past `attempts` (it says when to come back), but not past `total_s`."""
    with (
        Client(refusing_server, retry=RetryPolicy(attempts=1, total_s=0.0, max_wait_s=1)) as client,
        pytest.raises(ApiError),
    ):
        client.batch("b_1")
    assert len(_Refusing.seen) == 1


def test_a_429_is_retried_past_the_attempts(refusing_server: str) -> None:
    with Client(refusing_server, retry=RetryPolicy(attempts=1, max_wait_s=1)) as client:
        assert client.batch("b_1").id == "b_1"
    assert len(_Refusing.seen) == 3
