"""The gateway's boundaries: no torch in its process, and the real Celery path onto the compile queue."""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import redis
from fastapi.testclient import TestClient

from evalsvc.api.app import create_app
from evalsvc.api.enqueue import CeleryEnqueuer
from evalsvc.records.documents import State
from evalsvc.records.jobs import JobStore
from evalsvc.settings import Settings
from tests.api.conftest import AUTH_A, KEYS, SOLUTION, TASK_SOURCE, assert_problem, free_port


def test_importing_the_gateway_does_not_import_torch() -> None:
    code = "import evalsvc.api.app, sys; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_serving_and_enqueuing_do_not_import_torch(redis_url: str) -> None:
    """The whole request path, with the real Celery enqueuer, in a fresh process."""
    code = f"""
import json, sys
from fastapi.testclient import TestClient
from evalsvc.api.app import create_app
from evalsvc.settings import Settings
settings = Settings(redis_url={redis_url!r}, api_keys={{}}, rate_limit_per_s=10)
with TestClient(create_app(settings)) as c:
    task = c.post('/v1/tasks', json={{'source': {TASK_SOURCE!r}}}).json()['id']
    r = c.post('/v1/evaluations', json={{'task_id': task, 'solution': {SOLUTION!r}}})
    assert r.status_code == 202, r.text
    c.get('/v1/evaluations/' + r.json()['id'], params={{'wait': 0.1}})
    c.get('/readyz'); c.get('/metrics'); c.get('/v1/devices')
assert 'torch' not in sys.modules, 'torch imported'
print(json.dumps(r.json()['id']))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    job_id = json.loads(out.stdout.strip().splitlines()[-1])
    client = redis.Redis.from_url(redis_url)
    try:
        messages = [json.loads(m) for m in client.lrange("compile", 0, -1)]
    finally:
        client.close()
    assert len(messages) == 1
    assert messages[0]["headers"]["task"] == "evalsvc.compile"
    args, _kwargs, _embed = json.loads(base64.b64decode(messages[0]["body"]))
    assert args == [job_id]


def test_a_batch_is_published_in_order(redis_url: str) -> None:
    """enqueue_many pushes all messages at once: every one arrives, in order, as Celery's own message
    (a fresh task id and delivery tag each) that a worker would run."""
    enqueuer = CeleryEnqueuer.from_settings(Settings(redis_url=redis_url))
    client = redis.Redis.from_url(redis_url)
    ids = [f"e_{i:04d}" for i in range(300)]
    try:
        client.delete("compile")
        enqueuer.enqueue_many(ids)
        raw = client.lrange("compile", 0, -1)
    finally:
        client.close()
        enqueuer.close()
    messages = [json.loads(m) for m in reversed(raw)]  # LPUSH: the first sent is the last in the list
    assert [m["headers"]["task"] for m in messages] == ["evalsvc.compile"] * len(ids)
    assert [json.loads(base64.b64decode(m["body"]))[0] for m in messages] == [[i] for i in ids]
    assert len({m["headers"]["id"] for m in messages}) == len(ids)
    assert len({m["properties"]["delivery_tag"] for m in messages}) == len(ids)


def test_unreachable_broker_is_503_and_frees_the_job(redis_url: str) -> None:
    """Store up, broker down: the job is finished as our own error (no quota held, no dedup) and 503."""
    settings = Settings(redis_url=redis_url, api_keys=KEYS, rate_limit_per_s=0)
    broken = CeleryEnqueuer.from_settings(Settings(redis_url=f"redis://127.0.0.1:{free_port()}/0"))
    raw = redis.Redis.from_url(redis_url)
    store = JobStore(raw)
    try:
        with TestClient(create_app(settings, enqueuer=broken)) as c:
            task = c.post("/v1/tasks", json={"source": TASK_SOURCE}, headers=AUTH_A).json()["id"]
            r = c.post("/v1/evaluations", json={"task_id": task, "solution": SOLUTION}, headers=AUTH_A)
        assert_problem(r, 503, "queue_unavailable")
        assert store.inflight("tenant-a") == 0
        jobs = [store.get_job(k.decode().rsplit(":", 1)[1]) for k in raw.scan_iter("evalsvc:job:*")]
        assert len(jobs) == 1 and jobs[0] is not None and jobs[0].state is State.DONE
    finally:
        raw.close()


class FailingEnqueuer:
    """A transport that breaks in a way nobody planned for."""

    def enqueue(self, job_id: str) -> None:
        raise RuntimeError("boom")

    def enqueue_many(self, job_ids: list[str]) -> None:
        raise RuntimeError("boom")

    def close(self) -> None:
        return None


def test_unexpected_errors_are_a_500_problem(redis_url: str) -> None:
    settings = Settings(redis_url=redis_url, api_keys=KEYS, rate_limit_per_s=0)
    app = create_app(settings, enqueuer=FailingEnqueuer())
    with TestClient(app, raise_server_exceptions=False) as c:
        task = c.post("/v1/tasks", json={"source": TASK_SOURCE}, headers=AUTH_A).json()["id"]
        r = c.post("/v1/evaluations", json={"task_id": task, "solution": SOLUTION}, headers=AUTH_A)
    body = assert_problem(r, 500, "internal")
    assert "boom" not in r.text and body["instance"] == "/v1/evaluations"
