"""A real redis-server per session, and gateways built with `create_app` against it.

Only the enqueuer is swapped (for the in-memory `RecordingEnqueuer`): these tests are about the gateway;
the Celery path is exercised in test_boundary.py and by the end-to-end tests.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient

from evalsvc.api.app import create_app
from evalsvc.api.enqueue import RecordingEnqueuer
from evalsvc.records.stores import Records
from evalsvc.settings import Settings

KEYS = {"key-a": "tenant-a", "key-b": "tenant-b"}
AUTH_A = {"Authorization": "Bearer key-a"}
AUTH_B = {"X-API-Key": "key-b"}

TASK_SOURCE = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(64)]


def get_init_inputs():
    return []
"""

SOLUTION = {"files": {"solution.py": "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"}}


def solution(n: int = 0) -> dict:
    """A distinct valid solution per `n` (distinct content hash, hence no dedup between them)."""
    return {"files": {"solution.py": SOLUTION["files"]["solution.py"] + f"# variant {n}\n"}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def served(app: FastAPI) -> Iterator[str]:
    """`app` under a real uvicorn on a free loopback port, in a thread; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip(
            "redis-server is not on PATH (apt-get install redis-server); the API tests need a real one"
        )
    port = free_port()
    workdir: Path = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen(
        [
            exe,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)
        yield url
    finally:
        client.close()
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def redis_url(redis_server: str) -> Iterator[str]:
    client = redis.Redis.from_url(redis_server)
    client.flushall()
    yield redis_server
    client.close()


@dataclass
class Gateway:
    client: TestClient
    enqueuer: RecordingEnqueuer
    records: Records  # the test's own view of Redis, to finish jobs and seed state
    settings: Settings


GatewayFactory = Callable[..., Gateway]


@pytest.fixture
def make_gateway(redis_url: str) -> Iterator[GatewayFactory]:
    """Build a gateway with settings overrides; auth on (KEYS), rate limit off unless asked."""
    opened: list[tuple[TestClient, redis.Redis]] = []

    def make(**overrides: object) -> Gateway:
        fields: dict[str, object] = {"redis_url": redis_url, "api_keys": KEYS, "rate_limit_per_s": 0}
        fields.update(overrides)
        settings = Settings(**fields)  # type: ignore[arg-type]
        enqueuer = RecordingEnqueuer()
        client = TestClient(create_app(settings, enqueuer=enqueuer))
        client.__enter__()
        raw = redis.Redis.from_url(redis_url)
        opened.append((client, raw))
        return Gateway(client, enqueuer, Records(raw), settings)

    yield make
    for client, raw in opened:
        client.__exit__(None, None, None)
        raw.close()


@pytest.fixture
def gw(make_gateway: GatewayFactory) -> Gateway:
    return make_gateway()


def register(gw: Gateway, headers: dict[str, str], **task: object) -> str:
    """Register the relu task (or `task`'s fields) as the caller of `headers`: tasks are per tenant."""
    body = {"source": TASK_SOURCE, "name": "relu", **task}
    r = gw.client.post("/v1/tasks", json=body, headers=headers)
    assert r.status_code in (200, 201), r.text
    return r.json()["id"]


@pytest.fixture
def task_id(gw: Gateway) -> str:
    """The relu task, registered by tenant A (only A sees it; `register` it for B too where needed)."""
    return register(gw, AUTH_A)


def assert_problem(r: httpx.Response, status: int, code: str) -> dict:
    """An RFC 9457 problem with our machine-readable code."""
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["status"] == status
    assert body["code"] == code
    assert {"type", "title", "status", "code"} <= set(body)
    if status == 503:  # every 503 says when to come back (the API's promise)
        assert int(r.headers["Retry-After"]) >= 1, r.headers
    return body
