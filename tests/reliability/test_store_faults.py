"""Redis restarts, the Docker engine goes away, clients retry: no accepted submission is lost or doubled,
and the gateway and /readyz say what is wrong instead of hanging or answering 500."""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from bench.live_stack import LiveStack, wait_for
from tests.reliability.conftest import assert_never_rewritten, options, small_relu, submit, wait_done

pytestmark = pytest.mark.docker


def test_redis_restart_during_a_batch(stack: LiveStack, task_id: str) -> None:
    _, sol = small_relu()
    items = [
        {"task_id": task_id, "solution": sol.model_dump(mode="json"), "options": options(300 + i)}
        for i in range(4)
    ]
    r = httpx.post(stack.url + "/v1/batches", json={"evaluations": items}, timeout=30)
    assert r.status_code == 202, r.text
    batch = r.json()
    ids = [item["id"] for item in batch["items"]]
    stack.kill("redis", signal.SIGTERM)  # a restart: Redis writes its AOF and exits
    down = submit(stack, task_id, 399)
    assert down.status_code == 503, down.text
    assert down.json()["code"] == "store_unavailable"
    assert int(down.headers["Retry-After"]) >= 1
    poll = httpx.get(f"{stack.url}/v1/batches/{batch['id']}", timeout=30)
    assert poll.status_code == 503 and "Retry-After" in poll.headers
    ready = httpx.get(stack.url + "/readyz", timeout=30)
    assert ready.status_code == 503 and ready.json()["missing"] == ["redis"]
    time.sleep(2)
    stack.start("redis")
    views = [wait_done(stack, i, timeout=300) for i in ids]
    messages = [(v["result"] or {}).get("message") for v in views]
    assert [v["status"] for v in views] == ["ok"] * len(ids), messages
    after = submit(stack, task_id, 399)  # the gateway carries on once Redis is back
    assert after.status_code == 202, after.text
    assert wait_done(stack, after.json()["id"])["status"] == "ok"


def test_concurrent_retries_with_one_idempotency_key_make_one_evaluation(
    stack: LiveStack, task_id: str
) -> None:
    """A client that timed out and retried (several times, at once): one job, one answer."""
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: submit(stack, task_id, 400, key="retry-400"), range(8)))
    assert {a.status_code for a in answers} <= {200, 202}, [a.text for a in answers]
    ids = {a.json()["id"] for a in answers}
    assert len(ids) == 1, ids
    (job_id,) = ids
    done = wait_done(stack, job_id)
    again = submit(stack, task_id, 400, key="retry-400")
    assert again.json()["id"] == job_id and again.json()["result"] == done["result"]
    # Same content without the key is the same evaluation too (dedup), also under concurrency.
    with ThreadPoolExecutor(8) as pool:
        fresh = list(pool.map(lambda _: submit(stack, task_id, 401), range(8)))
    assert len({a.json()["id"] for a in fresh}) == 1, [a.json()["id"] for a in fresh]


def test_docker_engine_unavailable(stack: LiveStack, task_id: str) -> None:
    """The compile worker's engine is unreachable (a socket with no engine behind it, so the shared
    engine is left alone): /readyz names the reason, compile jobs end with a typed status."""
    stack.restart("compile", signal.SIGTERM, DOCKER_HOST="unix:///nonexistent/docker.sock")
    try:

        def says_why() -> bool:
            r = httpx.get(stack.url + "/readyz", timeout=10)
            return r.status_code == 503 and any("Docker" in m for m in r.json()["missing"])

        wait_for(says_why, 120, "/readyz to name the Docker engine")
        r = submit(stack, task_id, 500)
        assert r.status_code == 202, r.text
        view = wait_done(stack, r.json()["id"])
        assert view["status"] == "internal_error", view
        assert view["result"]["failure"] == "sandbox_unavailable"
        assert "Docker" in view["result"]["message"]
    finally:
        stack.restart("compile", signal.SIGTERM, DOCKER_HOST="")
    stack.wait_ready()
    retry = submit(stack, task_id, 500)  # our own error is not served again: the retry is evaluated
    assert retry.json()["id"] != r.json()["id"]
    assert wait_done(stack, retry.json()["id"])["status"] == "ok"


def test_no_result_was_written_twice(stack: LiveStack) -> None:
    assert_never_rewritten(stack)
