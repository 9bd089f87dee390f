"""DockerSandbox against the real engine and the real compile image: no mocks.

Skipped when no engine or image is usable; with EVALSVC_REQUIRE_DOCKER=1 (CI) that is a failure.
Set up the host with docker/ensure-docker.sh.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker.errors
import pytest
import torch
from docker.client import DockerClient
from docker.models.containers import Container

from evalsvc.sandbox.base import Mount, SandboxLimits, SandboxRun, SandboxUnavailable, sandbox_job
from evalsvc.sandbox.docker_sandbox import (
    JOB_LABEL,
    OWNER_LABEL,
    OWNER_PROCESS_LABEL,
    ROLE,
    ROLE_LABEL,
    RUN_LABEL,
    DockerSandbox,
    host_toolchain_mounts,
    process_alive,
    process_identity,
)

pytestmark = pytest.mark.docker

LIMITS = SandboxLimits(wall_seconds=60, memory_bytes=2 * 1024**3, cpus=2, pids=256, output_bytes=64 * 1024)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[DockerSandbox]:
    """One sandbox for the module; skip (or fail under EVALSVC_REQUIRE_DOCKER=1) without Docker."""
    sb = DockerSandbox(owner=f"pytest-{uuid.uuid4().hex[:12]}", toolchain_mounts=host_toolchain_mounts())
    try:
        sb.check()
    except SandboxUnavailable as exc:
        sb.close()
        reason = f"Docker sandbox unavailable: {exc}"
        if os.environ.get("EVALSVC_REQUIRE_DOCKER") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    yield sb
    sb.reap_leftovers()
    sb.close()


def sh(
    sb: DockerSandbox,
    script: str,
    limits: SandboxLimits = LIMITS,
    mounts: list[Mount] | None = None,
    env: dict[str, str] | None = None,
) -> SandboxRun:
    """Run a shell snippet in the sandbox."""
    return sb.run(["sh", "-c", script], mounts or [], limits, env or {})


def assert_healthy(sb: DockerSandbox) -> None:
    """After an abusive run, the next one still works."""
    r = sh(sb, "echo still-alive")
    assert r.exit_code == 0 and "still-alive" in r.output


def test_trivial_command_output_is_captured(sandbox: DockerSandbox) -> None:
    r = sh(sandbox, "echo to-stdout; echo to-stderr >&2; exit 3")
    assert r.exit_code == 3
    assert "to-stdout" in r.output and "to-stderr" in r.output
    assert not (r.timed_out or r.oom_killed or r.output_truncated)


def test_environment_is_only_what_run_gets(sandbox: DockerSandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALSVC_HOST_SECRET", "leaked")
    r = sh(sandbox, "env", env={"JOB_VAR": "given"})
    assert "JOB_VAR=given" in r.output
    assert "HOME=/scratch" in r.output
    assert "EVALSVC_HOST_SECRET" not in r.output and "leaked" not in r.output


def test_torch_and_the_package_import_inside(sandbox: DockerSandbox) -> None:
    code = "import torch, torch.utils.cpp_extension, evalsvc.sandbox.base; print('torch', torch.__version__)"
    r = sandbox.run(["python3", "-c", code], [], LIMITS, {})
    assert r.exit_code == 0, r.output
    assert f"torch {torch.__version__}" in r.output


def test_compilers_work_inside(sandbox: DockerSandbox) -> None:
    kernel = "__global__ void twice(float* x) { x[threadIdx.x] *= 2; }"
    script = (
        "nvcc --version && g++ --version && c++ --version && ninja --version"
        f" && echo '{kernel}' > /scratch/k.cu && nvcc -arch=sm_90 -c /scratch/k.cu -o /scratch/k.o"
        " && echo object-ok"
    )
    r = sh(sandbox, script)
    assert r.exit_code == 0, r.output
    assert "Cuda compilation tools" in r.output
    assert "g++" in r.output
    assert "object-ok" in r.output  # nvcc with its host compiler, as uid 65532, no GPU needed


def test_cpp_compiles_into_writable_out_mount(sandbox: DockerSandbox, tmp_path: Path) -> None:
    job, out = tmp_path / "job", tmp_path / "out"
    job.mkdir()
    out.mkdir(mode=0o777)
    out.chmod(0o777)  # the sandbox user (65532) must be able to write the artifact
    (job / "hello.cpp").write_text('#include <cstdio>\nint main() { std::puts("hello from sandbox"); }\n')
    mounts = [Mount(job, "/job"), Mount(out, "/out", read_only=False)]
    r = sh(sandbox, "g++ -O2 /job/hello.cpp -o /out/hello", mounts=mounts)
    assert r.exit_code == 0, r.output
    artifact = out / "hello"
    assert artifact.stat().st_uid == 65532
    done = subprocess.run([str(artifact)], capture_output=True, text=True, check=True, timeout=30)
    assert done.stdout.strip() == "hello from sandbox"


def _host_addresses() -> list[str]:
    """127.0.0.1 plus the host's outward address, if it has a route."""
    addresses = ["127.0.0.1"]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            addresses.append(probe.getsockname()[0])
        except OSError:
            pass
    return addresses


_NET_PROBE = """
import socket, sys
port = int(sys.argv[1])
for host in sys.argv[2:]:
    try:
        socket.create_connection((host, port), timeout=3).close()
        print("CONNECTED", host)
    except OSError as exc:
        print("refused", host, type(exc).__name__)
try:
    socket.getaddrinfo("pypi.org", 443)
    print("DNS-RESOLVED")
except OSError as exc:
    print("dns failed", type(exc).__name__)
import contextlib
import os
print("ifaces", sorted(os.listdir("/sys/class/net")))
"""


def test_network_is_unreachable(sandbox: DockerSandbox) -> None:
    accepted: list[object] = []
    with socket.create_server(("0.0.0.0", 0)) as server:
        server.settimeout(0.2)
        port = server.getsockname()[1]
        stop = threading.Event()

        def listen() -> None:
            while not stop.is_set():
                try:
                    accepted.append(server.accept()[1])
                except TimeoutError:
                    continue

        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        r = sandbox.run(["python3", "-c", _NET_PROBE, str(port), *_host_addresses()], [], LIMITS, {})
        stop.set()
        listener.join(5)
    assert r.exit_code == 0, r.output
    assert "CONNECTED" not in r.output
    assert "DNS-RESOLVED" not in r.output and "dns failed" in r.output
    assert "ifaces ['lo']" in r.output
    assert accepted == []


def test_host_secret_is_not_readable(sandbox: DockerSandbox, tmp_path: Path) -> None:
    token = secrets.token_hex(16)
    secret = tmp_path / "secret.txt"
    secret.write_text(token)
    secret.chmod(0o644)
    r = sh(sandbox, f"exec 2>&1; cat {secret}; cat /proc/1/root{secret}; echo listing; ls -A /tmp /scratch")
    assert token not in r.output
    assert r.output.count("No such file or directory") == 2, r.output
    assert r.output.split("listing", 1)[1].split() == ["/scratch:", "/tmp:"]  # host /tmp not visible


def test_root_fs_and_read_only_mounts_reject_writes(sandbox: DockerSandbox, tmp_path: Path) -> None:
    shared = tmp_path / "ro"
    shared.mkdir()
    shared.chmod(0o777)  # writable by anyone on the host: only the mount flag protects it
    script = (
        "touch /out/x 2>&1; touch /ro/x 2>&1; touch /etc/x 2>&1; touch /usr/x 2>&1; "
        "echo > /job/x 2>&1; echo done"
    )
    r = sh(sandbox, script, mounts=[Mount(shared, "/ro")])
    assert r.output.count("Read-only file system") >= 2, r.output  # /out (1777 in image) and /ro
    assert "done" in r.output
    assert list(shared.iterdir()) == []


def test_scratch_and_tmp_allow_exec(sandbox: DockerSandbox) -> None:
    script = (
        "printf '#!/bin/sh\\necho scripted-ok\\n' > /scratch/s.sh && chmod +x /scratch/s.sh && /scratch/s.sh"
        " && printf 'int main(void){return 7;}' > /tmp/a.c && gcc /tmp/a.c -o /scratch/a && /scratch/a;"
        " echo rc=$?"
    )
    r = sh(sandbox, script)
    assert "scripted-ok" in r.output and "rc=7" in r.output, r.output


def test_fork_bomb_ends_and_next_run_works(sandbox: DockerSandbox) -> None:
    limits = SandboxLimits(wall_seconds=8, memory_bytes=1024**3, cpus=1, pids=64, output_bytes=16 * 1024)
    started = time.monotonic()
    r = sh(sandbox, "bomb() { bomb | bomb & }; bomb; sleep 60", limits=limits)
    assert time.monotonic() - started < limits.wall_seconds + 10
    assert r.timed_out or r.exit_code != 0
    assert "fork" in r.output.lower(), r.output  # the shell reports forks refused by pids_limit
    assert_healthy(sandbox)


def test_memory_bomb_is_killed_and_next_run_works(sandbox: DockerSandbox) -> None:
    limits = SandboxLimits(wall_seconds=60, memory_bytes=256 * 1024**2, cpus=1, pids=64)
    code = "a = []\nwhile True:\n    a.append(bytearray(16 << 20))\n"
    r = sandbox.run(["python3", "-c", code], [], limits, {})
    assert not r.timed_out
    assert r.oom_killed or (r.exit_code not in (0, None)), r
    assert_healthy(sandbox)


def test_sleep_forever_times_out(sandbox: DockerSandbox) -> None:
    limits = SandboxLimits(wall_seconds=3)
    started = time.monotonic()
    r = sandbox.run(["sleep", "infinity"], [], limits, {})
    elapsed = time.monotonic() - started
    assert r.timed_out and r.exit_code is None
    assert limits.wall_seconds <= elapsed < limits.wall_seconds + 5
    assert_healthy(sandbox)


def test_huge_output_is_capped_keeping_head_and_tail(sandbox: DockerSandbox) -> None:
    limits = SandboxLimits(wall_seconds=60, output_bytes=64 * 1024)
    r = sh(sandbox, "echo HEAD-MARK; yes filler-line | head -c 20000000; echo; echo TAIL-MARK", limits=limits)
    assert r.exit_code == 0
    assert r.output_truncated
    assert r.output.startswith("HEAD-MARK\n")
    assert r.output.rstrip().endswith("TAIL-MARK")
    assert len(r.output.encode()) <= limits.output_bytes + 200
    assert int(r.extra["output_bytes_total"]) > 20_000_000


def test_reap_leftovers_removes_only_this_owners_containers(sandbox: DockerSandbox) -> None:
    client = DockerClient.from_env()
    try:
        mine = client.containers.create(
            sandbox.image, ["true"], labels={ROLE_LABEL: ROLE, OWNER_LABEL: sandbox.owner}
        )
        other = client.containers.create(
            sandbox.image, ["true"], labels={ROLE_LABEL: ROLE, OWNER_LABEL: f"{sandbox.owner}-other"}
        )
        try:
            removed = sandbox.reap_leftovers()
            assert mine.id in removed and other.id not in removed
            with pytest.raises(docker.errors.NotFound):
                client.containers.get(str(mine.id))
            client.containers.get(str(other.id))  # still there
        finally:
            for c in (mine, other):
                with contextlib.suppress(docker.errors.NotFound):
                    c.remove(force=True)
    finally:
        client.close()


def test_reap_leftovers_spares_containers_of_live_sibling_processes(sandbox: DockerSandbox) -> None:
    """Prefork children share the owner name: a child starting up must not kill a sibling's build
    (seen as "toolchain probe failed (exit 137)"); only a dead creator's containers are leftovers."""
    dead = subprocess.Popen(["true"])
    dead_identity = process_identity(dead.pid)
    dead.wait()
    assert dead_identity and not process_alive(dead_identity)
    sibling = subprocess.Popen(["sleep", "60"])
    client = DockerClient.from_env()
    created = []
    try:
        for identity in (process_identity(sibling.pid), dead_identity):
            labels = {ROLE_LABEL: ROLE, OWNER_LABEL: sandbox.owner, OWNER_PROCESS_LABEL: identity}
            created.append(client.containers.create(sandbox.image, ["true"], labels=labels))
        alive_one, dead_one = created
        removed = sandbox.reap_leftovers()
        assert dead_one.id in removed and alive_one.id not in removed
        client.containers.get(str(alive_one.id))  # the live sibling's container is still there
    finally:
        sibling.kill()
        sibling.wait()
        for c in created:
            with contextlib.suppress(docker.errors.NotFound):
                c.remove(force=True)
        client.close()


# A second process of the same worker (same owner), as a prefork sibling is: one build, held open by a gate.
_SIBLING = """
import json, sys
from pathlib import Path
from evalsvc.sandbox.base import Mount, SandboxLimits
from evalsvc.sandbox.docker_sandbox import DockerSandbox, host_toolchain_mounts
owner, gate, script = sys.argv[1:4]
sb = DockerSandbox(owner=owner, toolchain_mounts=host_toolchain_mounts())
try:
    r = sb.run(["sh", "-c", script], [Mount(Path(gate), "/gate")], SandboxLimits(wall_seconds=300), {})
    print(json.dumps({"exit_code": r.exit_code, "output": r.output}))
finally:
    sb.close()
"""
_GATED = "echo waiting; until [ -e /gate/open ]; do sleep 0.1; done; echo released"


def test_reap_leftovers_spares_running_builds_of_this_and_sibling_processes(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    """A reap (a pool child starting, the heartbeat) takes this process' own containers that no run uses
    and those of creators gone (also: of an earlier boot of the host), and leaves the builds running now,
    a sibling process' and this process' own, to finish (exit 0, not 137)."""
    gate = tmp_path / "gate"
    gate.mkdir()
    for d in (tmp_path, gate):
        d.chmod(0o755)
    limits = SandboxLimits(wall_seconds=300, memory_bytes=2 * 1024**3, cpus=1, pids=64, output_bytes=4096)
    sibling = subprocess.Popen(
        [sys.executable, "-c", _SIBLING, sandbox.owner, str(gate), _GATED],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ours: list[SandboxRun] = []

    def our_build() -> None:
        with sandbox_job("pytest-job"):
            ours.append(sh(sandbox, _GATED, limits, [Mount(gate, "/gate")]))

    builder = threading.Thread(target=our_build, daemon=True)
    builder.start()
    client = DockerClient.from_env()
    planted: list[Container] = []
    try:
        me, theirs = process_identity(os.getpid()), process_identity(sibling.pid)
        filters: dict[str, str | list[str] | bool] = {
            "label": [f"{OWNER_LABEL}={sandbox.owner}"],
            "status": "running",
        }
        deadline = time.monotonic() + 240
        running: dict[str, Container] = {}
        while set(running) != {me, theirs}:
            assert time.monotonic() < deadline, f"both builds should be running: {sorted(running)}"
            assert sibling.poll() is None, sibling.communicate()
            time.sleep(0.2)
            found = client.containers.list(filters=filters, ignore_removed=True)
            running = {c.labels.get(OWNER_PROCESS_LABEL, ""): c for c in found}
        assert running[me].labels.get(JOB_LABEL) == "pytest-job"
        pid_and_start = me.partition("@")[0]
        for creator, run in ((me, "not-in-flight"), (f"{pid_and_start}@{uuid.uuid4()}", uuid.uuid4().hex)):
            labels = {
                ROLE_LABEL: ROLE,
                OWNER_LABEL: sandbox.owner,
                OWNER_PROCESS_LABEL: creator,
                RUN_LABEL: run,
            }
            planted.append(client.containers.create(sandbox.image, ["true"], labels=labels))
        removed = sandbox.reap_leftovers()
        assert {c.id for c in planted} <= set(removed)
        assert running[me].id not in removed and running[theirs].id not in removed
        (gate / "open").touch()
        builder.join(limits.wall_seconds + 60)
        out, err = sibling.communicate(timeout=limits.wall_seconds + 60)
        assert len(ours) == 1 and ours[0].exit_code == 0 and "released" in ours[0].output, ours
        result = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
        assert result.get("exit_code") == 0 and "released" in result.get("output", ""), (out, err)
    finally:
        (gate / "open").touch()
        if sibling.poll() is None:
            sibling.kill()
        sibling.wait()
        for c in planted:
            with contextlib.suppress(docker.errors.NotFound):
                c.remove(force=True)
        client.close()


def test_no_container_is_left_after_runs(sandbox: DockerSandbox) -> None:
    sh(sandbox, "true")
    assert sandbox.reap_leftovers() == []


def test_unprivileged_user_without_capabilities(sandbox: DockerSandbox) -> None:
    r = sh(sandbox, "id -u; id -g; grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status")
    lines = r.output.split()
    assert lines[:2] == ["65532", "65532"], r.output
    status = dict(zip(lines[2::2], lines[3::2], strict=True))
    assert int(status["CapEff:"], 16) == 0
    assert int(status["CapPrm:"], 16) == 0
    assert int(status["CapBnd:"], 16) == 0
    assert status["NoNewPrivs:"] == "1"
    if sandbox.engine_seccomp:
        assert status["Seccomp:"] == "2"  # filter mode: the engine's default profile


def test_missing_image_says_what_to_run(sandbox: DockerSandbox) -> None:
    sb = DockerSandbox(owner=sandbox.owner, image="evalsvc-compile:does-not-exist")
    try:
        with pytest.raises(SandboxUnavailable, match=r"build-compile-image\.sh"):
            sb.check()
        with pytest.raises(SandboxUnavailable, match="not found"):
            sb.run(["true"], [], LIMITS, {})
    finally:
        sb.close()


def test_unreachable_engine_is_sandbox_unavailable(tmp_path: Path) -> None:
    sb = DockerSandbox(owner="nobody", base_url=f"unix://{tmp_path}/no-engine.sock")
    try:
        with pytest.raises(SandboxUnavailable):
            sb.check()
    finally:
        sb.close()
