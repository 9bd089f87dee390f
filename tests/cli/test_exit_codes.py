"""What the `evalsvc` command says and returns when it cannot do its work: real subprocesses, real ports."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from evalsvc.suite import EXAMPLES

ROOT = Path(__file__).parents[2]
TASK = EXAMPLES / "l1" / "relu" / "task.py"
SOLUTION = EXAMPLES / "l1" / "relu" / "cpu_ok.py"


def _evalsvc(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evalsvc.cli", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(torch.cuda.device_count() > 7, reason="this machine has a cuda:7")
def test_eval_on_a_device_this_machine_lacks_exits_3_with_one_line() -> None:
    run = _evalsvc("eval", "--task", str(TASK), "--solution", str(SOLUTION), "--device", "cuda:7")
    assert run.returncode == 3, run.stderr
    assert run.stderr.strip().splitlines() == [
        f"error: device cuda:7 is not on this machine ({torch.cuda.device_count()} CUDA device(s) visible)"
    ]


def test_eval_on_no_device_at_all_is_a_usage_error() -> None:
    run = _evalsvc("eval", "--task", str(TASK), "--solution", str(SOLUTION), "--device", "tpu")
    assert run.returncode == 2 and "device must be 'cpu', 'cuda' or 'cuda:N', not 'tpu'" in run.stderr


def test_submit_to_a_closed_port_says_so_in_at_most_three_lines_and_exits_3() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    run = _evalsvc("submit", "--task", str(TASK), "--solution", str(SOLUTION), "--url", url)
    lines = (run.stdout + run.stderr).strip().splitlines()
    assert run.returncode == 3 and 1 <= len(lines) <= 3, lines
    assert f"could not reach {url}/v1/evaluations" in lines[0] and "Traceback" not in run.stderr


def test_wait_for_a_closed_port_and_suites_without_redis_exit_3() -> None:
    run = _evalsvc("wait", "some-id", "--url", f"http://127.0.0.1:{_closed_port()}")
    assert run.returncode == 3 and len(run.stderr.strip().splitlines()) <= 3, run.stderr
    run = _evalsvc("suites", "list", EVALSVC_REDIS_URL=f"redis://127.0.0.1:{_closed_port()}/0")
    assert run.returncode == 3, run.stderr
    assert run.stderr.startswith("error: could not reach Redis") and len(run.stderr.splitlines()) <= 3


def test_debug_shows_the_traceback() -> None:
    run = _evalsvc("--debug", "wait", "x", "--url", f"http://127.0.0.1:{_closed_port()}")
    assert run.returncode == 1 and "Traceback" in run.stderr and "ConnectError" in run.stderr


def test_version_and_usage_errors() -> None:
    from importlib.metadata import version

    run = _evalsvc("--version")
    assert (run.returncode, run.stdout.strip()) == (0, f"evalsvc {version('evalsvc')}")
    assert _evalsvc("eval", "--no-such-option").returncode == 2
