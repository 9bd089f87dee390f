"""The runner's seccomp filter, in real processes: what a candidate would use to outlive its runner or reach
another process fails with EPERM (ENOSYS for clone3), and what a runner needs still works: threads, torch's
intra-op pool, an OpenMP library, torch.utils.cpp_extension, the profiler, the codec over its pipe."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import importlib
import json
import os
import platform
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path

import pytest
import torch

from evalsvc.engine.launcher import RunnerHandle, RunnerLauncher, RunnerLimits
from evalsvc.sandbox.seccomp import AARCH64, ARCHES, RULES, X86_64, build_filter

REPO = Path(__file__).resolve().parents[2]
# No runner, spare, compile container or test_isolation probe has this uid.
PROBE_UID = 65098
IS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not IS_ROOT, reason="runner isolation needs root")
NUMBERS = ARCHES[platform.machine()].numbers if platform.machine() in ARCHES else {}
PTRACE_ATTACH = 16
CLONE_ARGS_SIZE = 88  # struct clone_args, version 2

OMP_SOURCE = r"""
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

/* How many distinct threads ran a parallel region of two. */
int omp_distinct_threads(void) {
    long tids[2] = {0, 0};
    #pragma omp parallel num_threads(2)
    tids[omp_get_thread_num() & 1] = syscall(SYS_gettid);
    return (tids[0] != 0) + (tids[1] != 0 && tids[1] != tids[0]);
}
"""

FORKING_CANDIDATE = """
import os
import time

import torch.nn as nn

TOKEN = "{token}"


class ModelNew(nn.Module):
    def forward(self, x):
        with open("/proc/thread-self/comm", "w") as comm:  # inherited by a child: how the test finds one
            comm.write(TOKEN)
        if os.fork() == 0:  # the red team's child: a session of its own, alive after the runner is closed
            os.setsid()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                time.sleep(0.05)
            os._exit(0)
        return x.clone()
"""


def _outcome(action: Callable[[], object]) -> str:
    """Either "ok" or the errno name of the OSError the action raised."""
    try:
        action()
    except OSError as e:
        return errno.errorcode.get(e.errno or 0, str(e.errno))
    return "ok"


def _fork_and_reap() -> None:
    """os.fork, whose child (only a broken filter lets one be made) exits at once."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def _raise_errno(done: int) -> None:
    if done == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _raw_fork(number: int, *args: int | ctypes.c_void_p) -> None:
    """A raw clone-like system call; a child it makes despite the filter exits at once. PyDLL keeps the GIL
    held through the call, so such a child's interpreter is consistent."""
    libc = ctypes.PyDLL(None, use_errno=True)
    words = [ctypes.c_ulong(a) if isinstance(a, int) else a for a in args]  # syscall reads longs
    done = libc.syscall(ctypes.c_long(number), *words)
    if done == 0:
        os._exit(0)
    if done > 0:
        os.waitpid(done, 0)
    _raise_errno(done)


def _clone3() -> None:
    args = (ctypes.c_uint64 * (CLONE_ARGS_SIZE // 8))()
    args[4] = signal.SIGCHLD  # exit_signal: otherwise a plain fork
    _raw_fork(NUMBERS["clone3"], ctypes.byref(args), ctypes.c_size_t(CLONE_ARGS_SIZE))


def _ptrace_attach(pid: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    _raise_errno(libc.ptrace(PTRACE_ATTACH, pid, None, None))


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def _read_memory_of(pid: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(8)
    local, remote = _Iovec(ctypes.addressof(buffer), 8), _Iovec(0x400000, 8)
    read = libc.process_vm_readv
    read.restype = ctypes.c_ssize_t
    iov = ctypes.POINTER(_Iovec)
    read.argtypes = [ctypes.c_int, iov, ctypes.c_ulong, iov, ctypes.c_ulong, ctypes.c_ulong]
    _raise_errno(read(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))


def _unshare_user_namespace() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    _raise_errno(libc.unshare(0x10000000))  # CLONE_NEWUSER: unprivileged where the kernel allows it


def _io_uring() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)  # struct io_uring_params
    _raise_errno(libc.syscall(ctypes.c_long(NUMBERS["io_uring_setup"]), ctypes.c_ulong(1), params))


def _refused_calls(seen: dict[str, object], other: int) -> None:
    """What the red team's candidate did, and its neighbours; `other` is a process the runner's uid may
    signal and trace (so only the filter can refuse)."""
    for name, action in {
        "fork": _fork_and_reap,
        "subprocess": lambda: subprocess.run(["/bin/true"], check=False),
        "posix_spawn": lambda: os.posix_spawn("/bin/true", ["/bin/true"], {}),
        "execv": lambda: os.execv("/bin/true", ["/bin/true"]),
        "raw_clone": lambda: _raw_fork(NUMBERS["clone"], signal.SIGCHLD, 0, 0, 0, 0),
        "raw_clone3": _clone3,
        "setpgid": lambda: os.setpgid(0, 0),
        "kill_init": lambda: os.kill(1, 0),
        "kill_parent": lambda: os.kill(os.getppid(), 0),
        "kill_other": lambda: os.kill(other, 0),
        "kill_everyone": lambda: os.kill(-1, 0),
        "ptrace_other": lambda: _ptrace_attach(other),
        "read_other_memory": lambda: _read_memory_of(other),
        "unshare_user": _unshare_user_namespace,
        "socket_inet": lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM),
        "socket_unix": lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM),
        "io_uring": _io_uring,
    }.items():
        seen[name] = _outcome(action)


def _allowed_calls(seen: dict[str, object], omp_library: str) -> None:
    """What a runner and an honest candidate need, after the filter."""
    seen["tasks_at_install"] = len(os.listdir("/proc/self/task"))
    seen["kill_self"] = _outcome(lambda: os.kill(os.getpid(), 0))
    seen["kill_own_group"] = _outcome(lambda: os.kill(0, 0))
    got: list[int] = []
    signal.signal(signal.SIGUSR1, lambda *_: got.append(1))
    signal.raise_signal(signal.SIGUSR1)  # tgkill to itself
    signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)
    seen["signals_to_itself"] = len(got)
    seen["socketpair"] = _outcome(socket.socketpair)
    ran = threading.Event()
    thread = threading.Thread(target=ran.set)
    thread.start()
    thread.join(30)
    seen["python_thread"] = ran.is_set()
    torch.set_num_threads(2)
    x = torch.arange(1 << 23, dtype=torch.float64)
    seen["parallel_sum"] = float((x * 2).sum())
    seen["tasks_after_torch"] = len(os.listdir("/proc/self/task"))
    seen["omp_threads"] = ctypes.CDLL(omp_library).omp_distinct_threads()
    from evalsvc.engine.profiling import trace_calls

    trace_calls(lambda a: a * 2, [torch.ones(64)], torch.device("cpu"), runs=2)  # the runner's profile op
    seen["profiled"] = True


def runner_filter_probe(fd: str, scratch: str, data: str, other: str, omp_library: str) -> None:
    """In a fresh interpreter, as the runner starts: the forkserver's PRELOAD, the runner's own `_isolate`
    and imports, then the real filter; report through the codec on the inherited pipe."""
    seen: dict[str, object] = {}
    report = Connection(int(fd), readable=False)
    try:
        from evalsvc.engine.launcher import PRELOAD

        for name in PRELOAD:
            importlib.import_module(name)
        from evalsvc.sandbox.seccomp import install_runner_filter
        from evalsvc.sandboxed.runner import RunnerSetup, _isolate

        setup = RunnerSetup(
            scratch=scratch, device="cpu", isolate=True, memory_bytes=8 << 30, uid=PROBE_UID, cover=data
        )
        workdir = _isolate(setup)
        importlib.import_module("torch.utils.cpp_extension")
        seen["kill_other_before"] = _outcome(lambda: os.kill(int(other), 0))  # the uid alone allows it
        install_runner_filter()
        status = Path("/proc/self/status").read_text()
        seen["seccomp"] = status.split("Seccomp:")[1].split()[0]  # 2: filter mode
        _refused_calls(seen, int(other))
        _allowed_calls(seen, os.path.join(workdir, os.path.basename(omp_library)))
    except BaseException as e:  # reported, so the test shows what broke
        seen["error"] = "".join(traceback.format_exception(e))[-3000:]
    from evalsvc.engine.codec import send

    send(report, {"seen": json.dumps(seen), "tensor": torch.arange(1000, dtype=torch.float32)})
    os._exit(0)


def bare_filter_probe(fd: str) -> None:
    """In a fresh interpreter, no isolation and any uid (a runner started without root): the filter alone.
    Not a session leader, in its parent's process group and uid, so the kernel alone would allow these."""
    seen: dict[str, object] = {}
    try:
        from evalsvc.sandbox.seccomp import install_runner_filter

        install_runner_filter()
        status = Path("/proc/self/status").read_text()
        seen["no_new_privs"] = status.split("NoNewPrivs:")[1].split()[0]
        seen["setsid"] = _outcome(os.setsid)
        seen["setpgid"] = _outcome(lambda: os.setpgid(0, 0))
        seen["kill_parent"] = _outcome(lambda: os.kill(os.getppid(), 0))
        seen["fork"] = _outcome(_fork_and_reap)
        seen["socket_inet"] = _outcome(socket.socket)
        seen["kill_self"] = _outcome(lambda: os.kill(os.getpid(), 0))
    except BaseException as e:
        seen["error"] = "".join(traceback.format_exception(e))[-3000:]
    os.write(int(fd), json.dumps(seen).encode())
    os._exit(0)


def _run_probe(function: str, *args: str) -> bytes:
    """Run `function` of this module in a fresh interpreter; return what it wrote on its pipe."""
    read_end, write_end = os.pipe()
    call = f"from tests.integration.test_seccomp import {function}; {function}(*sys.argv[1:])"
    try:
        done = subprocess.run(
            [sys.executable, "-c", f"import sys; {call}", str(write_end), *args],
            cwd=REPO,
            pass_fds=(write_end,),
            capture_output=True,
            text=True,
            timeout=180,
        )
    finally:
        os.close(write_end)
    with os.fdopen(read_end, "rb") as report:
        raw = report.read()
    assert done.returncode == 0, done.stderr[-3000:]
    return raw


def _connection_holding(raw: bytes) -> Connection:
    """A connection to read `raw` (what a probe sent, under a pipe's capacity) back as the judge would."""
    read_end, write_end = os.pipe()
    os.write(write_end, raw)
    os.close(write_end)
    return Connection(read_end, writable=False)


def _data_dir() -> Path:
    """Under /var/tmp: the runner's uid must be able to walk down to its scratch."""
    data = Path(tempfile.mkdtemp(prefix="evalsvc-seccomp-", dir="/var/tmp"))
    data.chmod(0o755)
    return data


@pytest.fixture
def same_uid_process() -> Iterator[int]:
    """A process of the probe's uid that is not its child: the kernel alone would let the probe signal,
    trace and read it."""
    sleeper = subprocess.Popen(["sleep", "300"], user=PROBE_UID, group=PROBE_UID, extra_groups=[])
    yield sleeper.pid
    sleeper.kill()
    sleeper.wait()


def _build_omp_library(directory: Path) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("no gcc to build the OpenMP library")
    source, library = directory / "omp_probe.c", directory / "omp_probe.so"
    source.write_text(OMP_SOURCE)
    subprocess.run(
        ["gcc", "-O1", "-shared", "-fPIC", "-fopenmp", "-o", str(library), str(source)], check=True
    )
    return library


@needs_root
def test_isolated_runner_is_refused_processes_signals_and_sockets_but_keeps_threads(
    same_uid_process: int,
) -> None:
    from evalsvc.engine.codec import receive

    data = _data_dir()
    scratch = data / "scratch" / "evalsvc-run-seccomp"
    scratch.mkdir(parents=True)
    try:
        library = _build_omp_library(scratch)
        raw = _run_probe("runner_filter_probe", str(scratch), str(data), str(same_uid_process), str(library))
        message = receive(_connection_holding(raw))
        seen = json.loads(message["seen"])
        log = (scratch / "candidate.log").read_text(errors="replace")
        assert "error" not in seen, f"{seen.get('error')}\n{log}"
        assert torch.equal(message["tensor"], torch.arange(1000, dtype=torch.float32))
        assert seen["seccomp"] == "2"
        assert seen["kill_other_before"] == "ok"  # so the refusals below are the filter's
        refused = {
            name: seen[name]
            for name in [
                "fork", "subprocess", "posix_spawn", "execv", "raw_clone", "setpgid", "kill_init",
                "kill_parent", "kill_other", "kill_everyone", "ptrace_other", "read_other_memory",
                "unshare_user", "socket_inet", "socket_unix", "io_uring",
            ]
        }  # fmt: skip
        assert refused == dict.fromkeys(refused, "EPERM")
        assert seen["raw_clone3"] == "ENOSYS"
        assert seen["kill_self"] == seen["kill_own_group"] == seen["socketpair"] == "ok"
        assert seen["signals_to_itself"] == 2
        assert seen["python_thread"] is True
        assert seen["parallel_sum"] == float((1 << 23) * ((1 << 23) - 1))
        assert seen["tasks_after_torch"] > seen["tasks_at_install"]  # torch's pool started under the filter
        assert seen["omp_threads"] == 2
        assert seen["profiled"] is True
        assert os.waitpid(same_uid_process, os.WNOHANG) == (0, 0)  # still running, never stopped
    finally:
        shutil.rmtree(data)


def test_filter_alone_refuses_a_new_session_and_signals_to_its_parent() -> None:
    seen = json.loads(_run_probe("bare_filter_probe") or b"{}")
    assert "error" not in seen, seen["error"]
    assert seen == {
        "no_new_privs": "1",  # set by install_runner_filter where drop_privileges did not run
        "setsid": "EPERM",
        "setpgid": "EPERM",
        "kill_parent": "EPERM",
        "fork": "EPERM",
        "socket_inet": "EPERM",
        "kill_self": "ok",
    }


def test_filter_program_for_each_architecture() -> None:
    """Every rule is a call x86_64 has; aarch64 has all but fork and vfork (glibc forks through clone)."""
    assert {r.syscall for r in RULES} == set(X86_64.numbers)
    assert {r.syscall for r in RULES} - set(AARCH64.numbers) == {"fork", "vfork"}
    assert len({r.syscall for r in RULES}) == len(RULES)
    for arch in (X86_64, AARCH64):
        program = build_filter(arch, own_pid=4242)
        assert program[0] == (0x20, 0, 0, 4) and program[1][3] == arch.audit  # the arch is checked first
        assert program[-1] == (0x06, 0, 0, 0x7FFF0000)  # everything not named is allowed


def _start_tick(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[19])


def _processes(uid: int | None, comm: str, started_from: int) -> list[int]:
    """Processes started at or after `started_from` (clock ticks since boot) that run as `uid` or are
    named `comm`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            real_uid = int((entry / "status").read_text().split("Uid:")[1].split()[0])
            name = (entry / "comm").read_text().strip()
            if (real_uid == uid or name == comm) and _start_tick(int(entry.name)) >= started_from:
                found.append(int(entry.name))
    return found


def _seccomp_modes(pid: int) -> list[str]:
    """The seccomp mode of every thread of `pid` (2: filtered)."""
    modes = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            modes.append((task / "status").read_text().split("Seccomp:")[1].split()[0])
    return modes


def _artifact(directory: Path, source: str) -> Path:
    """An artifact as the compile stage leaves it, for a pure-Python candidate (nothing to compile)."""
    from evalsvc.compiler.toolchain import runtime_toolchain_view

    python, torch_version, torch_cuda, machine = runtime_toolchain_view()
    artifact = directory / "artifact"
    (artifact / "src").mkdir(parents=True)
    (artifact / "src" / "model_new.py").write_text(source)
    manifest = {
        "format": "kernelbench",
        "entry": "model_new.py",
        "toolchain": {"python": python, "torch": torch_version, "torch_cuda": torch_cuda, "machine": machine},
        "extensions": {},
    }
    (artifact / "manifest.json").write_text(json.dumps(manifest))
    return artifact


@contextlib.contextmanager
def _runner(device: str, source: str, memory_bytes: int) -> Iterator[RunnerHandle]:
    """A started runner of the real launcher (isolated where this is root) for a candidate of `source`,
    loaded; closed, with its launcher and data directory, on the way out."""
    data = _data_dir()
    (data / "scratch").mkdir()
    launcher = RunnerLauncher(
        device, IS_ROOT, RunnerLimits(memory_bytes=memory_bytes), scratch_root=data / "scratch", cover=data
    )
    handle = launcher.start(_artifact(data, source))
    try:
        handle.wait_ready(180)
        assert handle.request({"op": "load", "init_inputs": [], "state_dict": {}}, 180) == {"ok": True}
        yield handle
    finally:
        handle.close()
        launcher.close()
        shutil.rmtree(data, ignore_errors=True)


def test_forking_candidate_gets_a_runtime_error_and_leaves_no_process() -> None:
    """Through the real launcher: the forward's fork is refused, the judge gets a runtime_error, and once
    the runner is closed nothing of its uid (or of its name) is left running."""
    token = "sc" + secrets.token_hex(5)
    left: list[int] = []
    try:
        with _runner("cpu", FORKING_CANDIDATE.format(token=token), 4 << 30) as handle:
            assert handle.proc.pid is not None
            started = _start_tick(handle.proc.pid)
            reply = handle.request({"op": "run", "inputs": [torch.ones(8)], "poison_bytes": 0}, 60)
            assert reply["ok"] is False and reply["kind"] == "runtime_error", reply
            assert "PermissionError" in reply["error"] and "Operation not permitted" in reply["error"]
            assert set(_seccomp_modes(handle.proc.pid)) == {"2"}
        time.sleep(0.5)  # a child that escaped would be running on now
        left = _processes(handle.uid if IS_ROOT else None, token, started)
        assert left == []
    finally:
        for pid in left:  # only a broken filter leaves these: the runner's own descendants
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


CUDA_CANDIDATE = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x @ x)  # cuBLAS, loaded at its first use: under the filter
"""


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_runner_works_under_the_filter() -> None:
    """The filter goes on after the CUDA context, so the driver's threads exist by then (TSYNC); kernels,
    cuBLAS, the profiler (CUPTI) and CUDA graphs still work under it."""
    x = torch.randn(512, 512)
    with _runner("cuda", CUDA_CANDIDATE, 16 << 30) as handle:
        assert handle.proc.pid is not None
        reply = handle.request({"op": "run", "inputs": [x], "poison_bytes": 0}, 120)
        # Ran to the end: refused by the runner's own rule on torch operators, not by the kernel.
        assert reply.get("rule") == "torch_compute_in_forward", reply
        profiled = handle.request({"op": "profile", "inputs": [x], "runs": 2}, 120)
        assert profiled["ok"] and profiled["trace"]["kernels"], profiled
        graphed = handle.request({"op": "time_graph", "inputs": [x]}, 120)
        assert graphed["ok"], graphed
        modes = _seccomp_modes(handle.proc.pid)
        assert len(modes) > 1 and set(modes) == {"2"}  # the driver's threads too
