"""Hostile submissions against the real sandboxes (Docker compile, isolated runner) on the CPU device.

Each case is a real solution file under tests/corpus/hostile with its trick and expected status in its
header. For each: the expected status, nothing reached the listener, the planted secret is not in the
result, nothing was written outside scratch, and the next honest submission still evaluates.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
from pathlib import Path

import pytest

from evalsvc.cli_files import read_solution, read_task
from evalsvc.core.options import EvalOptions
from evalsvc.core.results import FailureKind, Status
from evalsvc.settings import Settings
from tests.corpus.reader import header

CORPUS = Path(__file__).parents[1] / "corpus" / "hostile"
SECRET_PATH = Path("/var/tmp/evalsvc-planted-secret")
PWNED = Path("/var/tmp/evalsvc-pwned")
OPTS = EvalOptions(trials=2, timing_budget_s=0.2, compile_baseline=False, timing_pool=2)

pytestmark = pytest.mark.docker


CASES = sorted(
    p for p in CORPUS.glob("*.py") if p.name != "task.py" and header(p).get("device") in ("any", "cpu")
)


class Listener:
    """A TCP listener on the host's loopback that records whatever reaches it."""

    def __init__(self, port: int) -> None:
        self.received: list[bytes] = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.received.append(conn.recv(1024) or b"<connected>")
            conn.close()


@pytest.fixture(scope="module")
def hostile_pipeline(cpu_settings: Settings):  # type: ignore[no-untyped-def]
    from evalsvc.wiring import make_local_pipeline

    settings = cpu_settings.model_copy(
        update={"compile_timeout_s": 90.0, "runner_call_timeout_s": 15.0, "runner_memory_bytes": 4 * 1024**3}
    )
    before = set(settings.scratch_dir.glob("evalsvc-run-*"))  # other runs' leftovers are not this test's
    pipeline = make_local_pipeline(settings)
    pipeline.compiler.screens = frozenset()  # the screens refuse most of these: test the sandboxes alone
    pipeline.scratch_before = before  # type: ignore[attr-defined]
    return pipeline


@pytest.fixture(scope="module")
def planted() -> str:
    token = secrets.token_hex(16)
    SECRET_PATH.write_text(token)
    SECRET_PATH.chmod(0o600)
    PWNED.unlink(missing_ok=True)
    os.environ["EVALSVC_PLANTED_SECRET"] = token  # the judge's own environment (log_symlink_environ)
    yield token
    os.environ.pop("EVALSVC_PLANTED_SECRET", None)
    SECRET_PATH.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def listener():  # type: ignore[no-untyped-def]
    lst = Listener(47613)
    yield lst
    lst.stop.set()
    lst.sock.close()


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_hostile_submission(hostile_pipeline, planted: str, listener: Listener, path: Path) -> None:  # type: ignore[no-untyped-def]
    task = read_task(CORPUS / "task.py")
    base_kib = _reset_peak_rss()
    result = hostile_pipeline.evaluate(task, read_solution(path), OPTS)
    growth_mib = (_vm_kib("VmHWM") - base_kib) >> 10
    expect = header(path)["expect"]
    print(f"{path.stem}: expected {expect}, got {result.status.value}: {(result.message or '')[:120]!r}")
    assert result.status is Status(expect), result.message
    if "failure" in header(path):  # the runner's death is typed, so metrics count it
        assert result.failure is FailureKind(header(path)["failure"]), result
    assert result.reward == -1
    assert planted not in result.model_dump_json()
    assert not PWNED.exists()
    assert listener.received == []
    if result.compile is not None and len(result.compile.log_excerpt) > 0:
        assert len(result.compile.log_excerpt) <= 4000
    assert _orphans() == []  # nothing the candidate started outlives its runner
    if "judge_growth_max_mib" in header(path):  # what the candidate made the judge itself hold, at its peak
        limit = int(header(path)["judge_growth_max_mib"])
        assert growth_mib <= limit, f"the judge's peak RSS grew by {growth_mib} MiB"
    honest = read_solution(CORPUS.parents[1].parent / "evalsvc/examples/l1/relu/cpu_ok.py")
    follow_up = hostile_pipeline.evaluate(task, honest, OPTS)
    assert follow_up.status is Status.OK, follow_up.message


def _vm_kib(field: str) -> int:
    """A VmRSS/VmHWM figure of this process (the judge) from /proc/self/status, in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _reset_peak_rss() -> int:
    """Reset this process's peak RSS (VmHWM) to its current RSS (clear_refs 5) and return that RSS, KiB."""
    Path("/proc/self/clear_refs").write_text("5")
    return _vm_kib("VmRSS")


def _orphans() -> list[int]:
    """Live processes under a CPU-device runner (or task) uid whose parent is gone (reparented): a live
    runner's parent is the forkserver."""
    from evalsvc.sandbox.isolation import RUNNER_UIDS, runner_uid

    uids = {runner_uid("cpu", slot) for slot in range(RUNNER_UIDS)}
    found = []
    for pid in (int(d) for d in os.listdir("/proc") if d.isdigit()):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        dead = fields.get("State", "").startswith("Z")  # killed, waiting for init to reap it
        if (
            int(fields.get("Uid", "0").split()[0]) in uids
            and fields.get("PPid", "").strip() == "1"
            and not dead
        ):
            found.append(pid)
    return found


def test_path_traversal_in_file_names_is_refused() -> None:
    from pydantic import ValidationError

    from evalsvc.core.solutions import Solution

    for bad in ("../evil.py", "/abs/path.py", "kernels/../../x.cu", "kernels/a b.cu"):
        with pytest.raises(ValidationError):
            Solution(files={bad: "x", "model_new.py": "y", "kernels/k.cu": "z"}, format="cuda_agent")


def test_no_root_owned_leftovers_in_scratch(hostile_pipeline, cpu_settings: Settings) -> None:  # type: ignore[no-untyped-def]
    hostile_pipeline.evaluator.judge.close()  # the spare runner's scratch is in use, not left over
    before = hostile_pipeline.scratch_before
    leftovers = [p for p in cpu_settings.scratch_dir.glob("evalsvc-run-*") if p.exists() and p not in before]
    assert leftovers == [], [(p, sorted(str(f.relative_to(p)) for f in p.rglob("*"))[:20]) for p in leftovers]
