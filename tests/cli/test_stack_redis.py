"""`evalsvc up` and a Redis already answering at its URL: its own (left by an earlier `up` on the same data
directory) is used, anybody else's is refused unless asked for, and either way it says so."""

from __future__ import annotations

import logging
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

from evalsvc.stack import Stack, redis_command


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def redis_in(directory: Path) -> Iterator[str]:
    """A real redis-server on a free port keeping its data in `directory`; its URL."""
    port = _free_port()
    directory.mkdir(parents=True)
    proc = subprocess.Popen(redis_command(port, directory), stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    for _ in range(200):
        try:
            redis.Redis.from_url(url).ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    try:
        yield url
    finally:
        proc.kill()
        proc.wait()


def test_a_foreign_redis_is_refused_unless_asked_for(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "elsewhere"
    with redis_in(directory) as url:
        stack = Stack(data_dir=tmp_path / "mine", redis_url=url)
        with pytest.raises(RuntimeError, match=f"not this stack's .*dir: {directory}.*--use-running-redis"):
            stack.start_redis()
        with caplog.at_level(logging.WARNING, logger="evalsvc.stack"):
            stack.start_redis(reuse_foreign=True)
    assert stack.children == [] and "that is not this stack's" in caplog.text


def test_the_stacks_own_redis_is_used_again(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with redis_in(tmp_path / "mine" / "redis") as url:  # what an earlier `up` on this data dir left running
        stack = Stack(data_dir=tmp_path / "mine", redis_url=url)
        with caplog.at_level(logging.WARNING, logger="evalsvc.stack"):
            stack.start_redis()
    assert stack.children == [] and "this data dir's" in caplog.text


def test_a_sentinel_deployment_is_used_as_it_is(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A Sentinel URL names Redis run elsewhere (docs/operations.md): `up` starts none and says so, without
    the password."""
    url = "sentinel://:hunter2@127.0.0.1:26379,127.0.0.1:26380/evalsvc/0"
    stack = Stack(data_dir=tmp_path / "mine", redis_url=url)
    with caplog.at_level(logging.INFO, logger="evalsvc.stack"):
        stack.start_redis()
    assert stack.children == [] and not (tmp_path / "mine" / "redis").exists()
    assert "127.0.0.1:26379,127.0.0.1:26380 master evalsvc" in caplog.text and "hunter2" not in caplog.text
