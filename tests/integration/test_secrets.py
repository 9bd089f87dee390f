"""No secret reaches untrusted code (issue 20, item 1).

Canaries are planted where a deployment puts secrets: the API keys, a Redis password in the Redis URL, a
cloud credential variable, a secrets directory, /etc/evalsvc, the data directory (the artifact store).
1. The battery: one candidate per place a candidate could look (its inherited environment block, its whole
   memory, every process it can see, its open descriptors, the file system), and one task per place (its
   module body searches, in the task's own process: tasks are tenants' code too), run by a process started
   with the secrets in its environment as a worker would be, the static screens off so that only
   isolation stands in the way. The same searches, run in that process, find the canaries there (the
   positive control: a search that cannot see cannot pass).
2. `evalsvc up` with secrets in its environment: no child's environment or command line holds one, the
   runner template's environment and memory hold none, no result or metric shows one; the stack works with
   them (authenticated API, password-protected Redis) and restarts a killed device worker.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from evalsvc.sdk import Client
from evalsvc.suite import example_pair
from tests.conftest import TEST_DATA
from tests.corpus.secrets import search
from tests.corpus.secrets.battery import candidate, hunting_task

pytestmark = pytest.mark.docker
ROOT = Path(__file__).parents[2]


def canary() -> str:
    return "EVCANARY" + secrets.token_hex(12)


def found_in(text: str) -> set[str]:
    return set(search.CANARY.findall(text.encode()))


class Planted:
    """Canaries in the environment a worker or `evalsvc up` starts with, and in files."""

    def __init__(self, root: Path) -> None:
        self.api_key, self.redis_password, self.cloud, self.token = canary(), canary(), canary(), canary()
        self.files: list[Path] = []
        self.secrets_dir = root / "operator-secrets"
        self.secrets_dir.mkdir(mode=0o700)
        self.file_canaries = {
            self.secrets_dir / "cloud_credentials": canary(),
            Path("/etc/evalsvc") / f"canary-{secrets.token_hex(4)}": canary(),
            TEST_DATA / f"canary-{secrets.token_hex(4)}": canary(),  # the data directory, artifact store
        }
        for path, value in self.file_canaries.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(value)
            path.chmod(0o644 if path.parent != self.secrets_dir else 0o600)  # readable, if it were in view

    def env(self, redis_port: int) -> dict[str, str]:
        return {
            "EVALSVC_API_KEYS": json.dumps({self.api_key: "alice"}),
            "EVALSVC_REDIS_URL": f"redis://:{self.redis_password}@127.0.0.1:{redis_port}/0",
            "AWS_SECRET_ACCESS_KEY": self.cloud,
            "CUDA_AUTH_TOKEN": self.token,  # a name with a prefix the runner template keeps
        }

    @property
    def all(self) -> set[str]:
        return {self.api_key, self.redis_password, self.cloud, self.token, *self.file_canaries.values()}

    def remove(self) -> None:
        for path in self.file_canaries:
            path.unlink(missing_ok=True)


@pytest.fixture
def planted(tmp_path: Path) -> Iterator[Planted]:
    p = Planted(tmp_path)
    yield p
    p.remove()


def test_canary_battery_finds_nothing_from_inside_the_runner(tmp_path: Path, planted: Planted) -> None:
    control = tmp_path / "control"
    control.mkdir()
    (control / "planted").write_text(control_canary := canary())
    env = {**os.environ, **planted.env(6379), "EVALSVC_SECRETS_DIR": str(planted.secrets_dir)}
    run = subprocess.run(
        [sys.executable, "-m", "tests.corpus.secrets.battery", str(TEST_DATA), str(control)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    results = {line["place"]: line["result"] for line in lines if "place" in line}
    by_tasks = {line["task_place"]: line["result"] for line in lines if "task_place" in line}
    control_found = next(line["control"] for line in lines if "control" in line)
    assert set(results) == set(search.PLACES) == set(by_tasks)
    for who, place, result in [("candidate", *r) for r in results.items()] + [
        ("task", *r) for r in by_tasks.items()
    ]:
        message = result["message"] or ""
        assert f"SEARCHED {place} FOUND [] END" in message, (who, place, result["status"], message[-1500:])
        assert not found_in(json.dumps(result)), (who, place, found_in(json.dumps(result)))
    assert all(r["failure"] == "task_invalid" for r in by_tasks.values())
    # The positive control: where the secrets are, the same searches see them.
    env_canaries = {planted.api_key, planted.redis_password, planted.cloud, planted.token}
    for place in ("environ_block", "memory", "processes"):
        assert env_canaries <= set(control_found[place]), (place, control_found[place])
    assert control_found["open_files"] == [control_canary]
    assert control_found["secret_files"] == [control_canary]


# --- evalsvc up ---------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError:
        return b""


def _cmdline(pid: int) -> str:
    return _read(f"/proc/{pid}/cmdline").replace(b"\0", b" ").decode(errors="replace")


def _memory_canaries(pid: int) -> set[bytes]:
    """Canaries in a process's writable memory, read from outside (as root)."""
    found: set[bytes] = set()
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            if "rw" not in fields[1]:
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            try:
                mem.seek(start)
                found |= set(search.CANARY.findall(mem.read(end - start)))
            except (OSError, ValueError, OverflowError):
                continue
    return found


class UpStack:
    def __init__(self, root: Path, planted: Planted) -> None:
        self.data = root / "data"
        self.data.mkdir()
        for shared in ("pch", "artifacts"):  # the precompiled headers and builds other tests made
            (TEST_DATA / shared).mkdir(parents=True, exist_ok=True)
            (self.data / shared).symlink_to(TEST_DATA / shared)
        self.port, self.redis_port = _free_port(), _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            **planted.env(self.redis_port),
            "EVALSVC_COMPILE_BACKEND": "docker",
            "EVALSVC_RATE_LIMIT_PER_S": "0",
        }
        cmd = [sys.executable, "-m", "evalsvc.cli", "up", "--data-dir", str(self.data), "--no-demo"]
        self.metrics_port = _free_port()
        cmd += ["--port", str(self.port), "--metrics-port", str(self.metrics_port)]
        self.log = root / "up.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def wait(self, cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            if cond():
                return
            time.sleep(0.5)
        pytest.fail(f"timed out waiting for {what}: {self.log.read_text()[-3000:]}")

    def ready(self) -> bool:
        try:
            return httpx.get(self.url + "/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def metrics_urls(self) -> list[str]:
        """The gateway's and the two workers' exporters (the device worker's is the next port)."""
        ports = (self.metrics_port, self.metrics_port + 1)
        return [self.url + "/metrics", *(f"http://127.0.0.1:{p}/metrics" for p in ports)]

    def children(self) -> list[int]:
        return _descendants(self.proc.pid)

    def stop(self) -> None:
        with_pgid = [self.proc.pid, *self.children()]
        with contextlib.suppress(ProcessLookupError):  # a test may have stopped it already (SIGTERM)
            os.killpg(self.proc.pid, signal.SIGINT)  # `up` stops its children in its own `finally`
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=60)
        for pid in with_pgid:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)


@pytest.fixture
def up(tmp_path: Path, planted: Planted) -> Iterator[UpStack]:
    stack = UpStack(tmp_path, planted)
    try:
        stack.wait(stack.ready, 300, "evalsvc up to be ready")
        yield stack
    finally:
        stack.stop()
        shutil.rmtree(tmp_path / "data", ignore_errors=True)


def _evaluate(
    up: UpStack, key: str, solution_text: str | None = None, task_source: str | None = None
) -> dict:
    task, solution = example_pair("l1/relu", "cpu")
    task = task.model_copy(update={"source": task_source or task.source.replace("ROWS = 5120", "ROWS = 64")})
    if solution_text is not None:
        from evalsvc.core.solutions import Solution

        solution = Solution(files={"solution.py": solution_text})
    with Client(up.url, key) as client:
        view = client.evaluate(task, solution, timeout=600)
    return json.loads(view.model_dump_json())


def test_evalsvc_up_keeps_secrets_from_children_restarts_a_killed_worker_and_stops_on_sigterm(
    up: UpStack, planted: Planted
) -> None:
    # Secrets reached the children that need them, as files: the API needs the key, the workers the password.
    assert httpx.get(up.url + "/v1/tasks", timeout=10).status_code == 401
    honest = _evaluate(up, planted.api_key)
    assert honest["result"]["status"] == "ok", honest
    hunter = _evaluate(up, planted.api_key, candidate("memory"))  # the static screens are on here
    assert hunter["result"]["status"] != "ok"
    # A task is code too: its module body searches its own process's memory, in the device worker's stack.
    task_hunter = _evaluate(up, planted.api_key, task_source=hunting_task("memory"))
    assert task_hunter["result"]["failure"] == "task_invalid", task_hunter
    assert "SEARCHED memory FOUND [] END" in task_hunter["result"]["message"], task_hunter

    children = up.children()
    assert children
    for pid in children:
        for part in ("environ", "cmdline"):
            assert not search.CANARY.findall(_read(f"/proc/{pid}/{part}")), (pid, part, _cmdline(pid))
    templates = [pid for pid in children if "multiprocessing.forkserver" in _cmdline(pid)]
    assert templates, [_cmdline(pid) for pid in children]
    for pid in templates:  # every runner is forked from one: its memory is what a runner starts with
        assert _memory_canaries(pid) == set(), _cmdline(pid)

    shown = json.dumps([honest, hunter, task_hunter])
    metrics = [httpx.get(url, timeout=10).text for url in up.metrics_urls()]
    assert len(metrics) == 3 and all("evalsvc_" in m for m in metrics)
    assert not found_in(shown + "".join(metrics))

    # A device worker killed from outside is started again and the next evaluation succeeds.
    # `evalsvc worker gpu` execs workers.main; its Celery name (-n) starts with its kind.
    worker = next(pid for pid in children if " -n gpu-" in _cmdline(pid) and _parent(pid) == up.proc.pid)
    os.killpg(worker, signal.SIGKILL)
    up.wait(lambda: "worker-cpu started again" in up.log.read_text(), 120, "the worker's restart")
    after = _evaluate(up, planted.api_key)
    assert after["result"]["status"] == "ok", after

    # SIGTERM (what Kubernetes, systemd and CI send) stops every process the stack started, and `up` with it.
    everything = [up.proc.pid, *up.children()]
    up.proc.send_signal(signal.SIGTERM)
    up.proc.wait(timeout=90)
    left = [pid for pid in everything if _running(pid)]
    assert left == [], [_cmdline(pid) for pid in left]
    assert "stopping (SIGTERM)" in up.log.read_text()


def _running(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
    assert re.search(r"worker-cpu exited with code -9", up.log.read_text())


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
