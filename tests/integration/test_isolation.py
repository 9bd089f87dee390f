"""The runner's private view, in real child processes with real mount, network and procfs namespaces."""

from __future__ import annotations

import ctypes
import errno
import importlib
import json
import os
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from evalsvc.sandbox.isolation import (
    CLONE_NEWNS,
    MS_BIND,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    SECRET_DIRS,
    _libc,
    _mount,
    drop_privileges,
    private_filesystem_view,
    unshare_network,
)
from evalsvc.sandbox.memory_bound import memory_group

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root")

REPO = Path(__file__).resolve().parents[2]
# No runner, spare or compile container has this uid: in its own /proc a probe must see itself alone.
PROBE_UID = 65099


def _probe(workdir: Path, cover: Path, report: int) -> None:
    """Child: isolate like the GPU runner does, then try what a candidate would."""
    seen: dict[str, object] = {}
    try:
        unshare_network()
        target = private_filesystem_view(str(workdir), str(cover))
        drop_privileges()
        os.chdir(target)

        def attempt(name: str, action) -> None:
            try:
                action()
                seen[name] = "ok"
            except OSError as e:
                seen[name] = e.strerror

        attempt("write_work", lambda: Path("out.txt").write_text("mine"))
        attempt("write_tmp", lambda: Path("/tmp/evalsvc-isolation-probe").write_text("x"))
        # What the NVIDIA driver does inside cuInit (driver 570+): name its own thread.
        attempt("name_thread", lambda: Path("/proc/thread-self/comm").write_text("cuda-probe"))
        attempt("raise_priority", lambda: Path("/proc/self/oom_score_adj").write_text("-1000"))
        seen["cover_listing"] = sorted(os.listdir(cover))
        seen["comm"] = Path("/proc/thread-self/comm").read_text().strip()
    except BaseException as e:  # reported, so the test shows what broke
        seen["error"] = "".join(traceback.format_exception(e))
    os.write(report, json.dumps(seen).encode())
    os._exit(0)


def test_view_is_read_only_but_proc_stays_writable_for_the_cuda_driver() -> None:
    # Under /var/tmp, not pytest's tmp_path: the sandbox uid must be able to walk down to its workdir.
    cover = Path(tempfile.mkdtemp(prefix="evalsvc-isolation-", dir="/var/tmp"))
    cover.chmod(0o755)
    workdir = cover / "jobs" / "j1"
    workdir.mkdir(parents=True)
    (cover / "artifacts").mkdir()
    (cover / "artifacts" / "other-tenant.so").write_text("secret")
    os.chown(workdir, 65532, 65532)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        _probe(workdir, cover, w)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    seen = json.loads(os.read(r, 65536) or b"{}")
    assert os.waitstatus_to_exitcode(status) == 0
    assert "error" not in seen, seen
    assert seen["write_work"] == "ok"
    assert (workdir / "out.txt").read_text() == "mine"
    assert seen["write_tmp"] == "Read-only file system"
    assert seen["name_thread"] == "ok" and seen["comm"] == "cuda-probe"
    assert seen["raise_priority"] == "Permission denied"  # /proc is writable, but only as the kernel allows
    assert seen["cover_listing"] == ["work"]  # the data dir (artifacts, other jobs) is hidden
    assert not Path("/tmp/evalsvc-isolation-probe").exists()
    shutil.rmtree(cover)


def test_torch_dynamo_imports_as_the_sandbox_uid() -> None:
    """The sandbox uid has no passwd entry; torch._dynamo asks getpass.getuser() at import (seen on the
    H200: every CUDA evaluation died with "getpwuid(): uid not found: 65532")."""
    import subprocess
    import sys

    from evalsvc.sandboxed.runner import runner_environment

    workdir = Path(tempfile.mkdtemp(prefix="evalsvc-dynamo-", dir="/var/tmp"))
    os.chown(workdir, 65532, 65532)
    probe = (
        "import getpass, torch._dynamo.package as p, torch._inductor.runtime.cache_dir_utils as c;"
        "print(getpass.getuser(), c.cache_dir())"
    )
    env = runner_environment(str(workdir))
    env["PATH"] = os.environ["PATH"]  # to find this interpreter's own prefix, as the warm template has it
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env=env,
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
        user=65532,
        group=65532,
        extra_groups=[],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    user, cache = done.stdout.split()
    assert user == "evalsvc-runner"
    assert cache.startswith(str(workdir))
    shutil.rmtree(workdir)


def _data_dir() -> Path:
    """A data directory like the worker's, under /var/tmp: the runner's uid must be able to walk down to its
    scratch (pytest's tmp_path is under /tmp, which no runner sees)."""
    data = Path(tempfile.mkdtemp(prefix="evalsvc-isolation-", dir="/var/tmp"))
    data.chmod(0o755)
    return data


def _attempt(seen: dict[str, object], name: str, action: Callable[[], object]) -> None:
    try:
        action()
        seen[name] = "ok"
    except OSError as e:
        seen[name] = e.strerror


def _rename_a_thread() -> str:
    """What the NVIDIA driver does inside cuInit: name another of its own threads through
    /proc/self/task/<tid>/comm. Returns the name read back, or why the write failed."""
    parked, release = threading.Event(), threading.Event()
    tids: list[int] = []

    def park() -> None:
        tids.append(threading.get_native_id())
        parked.set()
        release.wait(30)

    thread = threading.Thread(target=park)
    thread.start()
    parked.wait(30)
    comm = Path(f"/proc/self/task/{tids[0]}/comm")
    try:
        comm.write_text("cuda-probe")
        return comm.read_text().strip()
    except OSError as e:
        return str(e.strerror)
    finally:
        release.set()
        thread.join()


def _run_probe(function: str, *args: str) -> dict[str, object]:
    """Run `function` of this module in a fresh interpreter (as root, so that it can isolate itself) and
    return what it reports on a pipe: stdout and stderr are the candidate log's once it is isolated."""
    read_end, write_end = os.pipe()
    call = f"from tests.integration.test_isolation import {function}; {function}(*sys.argv[1:])"
    try:
        done = subprocess.run(
            [sys.executable, "-c", f"import sys; {call}", str(write_end), *args],
            cwd=REPO,
            pass_fds=(write_end,),
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        os.close(write_end)
    with os.fdopen(read_end, "rb") as report:
        raw = report.read()
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(raw or b"{}")


def _report(fd: str, seen: dict[str, object]) -> None:
    os.write(int(fd), json.dumps(seen).encode())
    os._exit(0)


HOST_SHM_KEY, RUNNER_SHM_KEY = 0x45564C01, 0x45564C02


def _shmget(key: int, size: int, flags: int) -> int | str:
    """A System V shared memory id for `key` (created with IPC_CREAT in flags), or the error's name."""
    libc = ctypes.CDLL(None, use_errno=True)
    shmid = libc.shmget(ctypes.c_int(key), ctypes.c_size_t(size), ctypes.c_int(flags))
    return shmid if shmid >= 0 else errno.errorcode[ctypes.get_errno()]


def _host_segments() -> set[int]:
    lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    return {int(line.split()[0]) & 0xFFFFFFFF for line in lines}


def runner_probe(fd: str, scratch: str, data: str, planted: str) -> None:
    """In a fresh interpreter: start as the launcher's forkserver does (its PRELOAD imported), isolate with
    the runner's own `_isolate`, then look for what a candidate would look for."""
    seen: dict[str, object] = {}
    try:
        from evalsvc.engine.launcher import PRELOAD

        for name in PRELOAD:
            importlib.import_module(name)
        from evalsvc.sandbox.memory_bound import prepare_memory_group
        from evalsvc.sandboxed.runner import RunnerSetup, _isolate

        group = prepare_memory_group(PROBE_UID, 3 << 30)
        setup = RunnerSetup(
            scratch=scratch,
            device="cpu",
            isolate=True,
            memory_bytes=8 << 30,
            uid=PROBE_UID,
            cover=data,
            memory_group=group,
        )
        workdir = _isolate(setup)
        seen["memory_group"] = group
        seen["oom_score_adj"] = Path("/proc/self/oom_score_adj").read_text().strip()
        _attempt(seen, "lower_oom_score_adj", lambda: Path("/proc/self/oom_score_adj").write_text("0"))
        seen["cgroups"] = Path("/proc/self/cgroup").read_text()
        if group:
            _attempt(seen, "leave_group", lambda: Path(group).parent.joinpath("cgroup.procs").write_text("0"))
        seen["pid"], seen["workdir"], seen["home"] = os.getpid(), workdir, os.environ["HOME"]
        seen["proc_pids"] = sorted(int(name) for name in os.listdir("/proc") if name.isdigit())
        parent = os.getppid()
        for name, path in [
            ("init_cmdline", "/proc/1/cmdline"),
            ("parent_cmdline", f"/proc/{parent}/cmdline"),
            ("parent_environ", f"/proc/{parent}/environ"),
        ]:
            _attempt(seen, name, Path(path).read_bytes)
        seen["planted_visible"] = [p for p in json.loads(planted) if os.path.lexists(p)]
        seen["data_listing"] = sorted(os.listdir(data))
        _attempt(seen, "write_scratch", lambda: Path("out.txt").write_text("mine"))
        _attempt(seen, "write_tmp", lambda: Path("/tmp/evalsvc-isolation-probe").write_text("x"))
        seen["thread_comm"] = _rename_a_thread()
        seen["host_segment"] = _shmget(HOST_SHM_KEY, 0, 0)  # the worker's segment, planted by the test
        seen["own_segment"] = _shmget(RUNNER_SHM_KEY, 4096, 0o1666)  # IPC_CREAT, world-writable
        # What every load_inline solution imports once its runner is isolated, and a first tensor op.
        import torch
        import torch.utils.cpp_extension

        x = torch.arange(6.0).reshape(2, 3)
        seen["matmul"] = (x @ x.T).tolist()
    except BaseException as e:  # reported, so the test shows what broke
        seen["error"] = "".join(traceback.format_exception(e))
    _report(fd, seen)


def fresh_import_probe(fd: str, workdir: str, data: str) -> None:
    """In a fresh interpreter that has not imported torch: isolate, then import torch and
    torch.utils.cpp_extension inside the view (every file they open must be in it) and run a tensor op."""
    seen: dict[str, object] = {"torch_before": "torch" in sys.modules}
    try:
        unshare_network()
        target = private_filesystem_view(workdir, data)
        drop_privileges(PROBE_UID)
        os.chdir(target)
        os.environ.clear()
        os.environ.update({"PATH": "/usr/bin:/bin", "HOME": target, "TMPDIR": target, "USER": "probe"})
        import torch
        import torch.utils.cpp_extension

        seen["sum"] = float(torch.ones(4, 4).sum())
    except BaseException as e:
        seen["error"] = "".join(traceback.format_exception(e))
    _report(fd, seen)


@pytest.fixture
def planted() -> Iterator[list[Path]]:
    """World-readable files where a runner must not look: the host's /tmp and /var/tmp, /run (where
    /run/secrets lives), and /root beside the Python prefix inside it."""
    token = secrets.token_hex(8)
    run_dir = Path(f"/run/evalsvc-isolation-{token}")
    run_dir.mkdir(mode=0o755)
    files = [
        Path(f"/tmp/evalsvc-isolation-{token}"),
        Path(f"/var/tmp/evalsvc-isolation-{token}"),
        Path(f"/root/evalsvc-isolation-{token}"),
        run_dir / "secret",
    ]
    for path in files:
        path.write_text(token)
        path.chmod(0o644)
    yield files
    for path in files:
        path.unlink(missing_ok=True)
    run_dir.rmdir()


def test_runner_sees_only_its_own_processes_and_scratch(planted: list[Path]) -> None:
    data = _data_dir()
    scratch = data / "scratch" / "evalsvc-run-mine"
    scratch.mkdir(parents=True)
    other_job = data / "scratch" / "evalsvc-run-other"
    other_job.mkdir()
    (other_job / "solution.py").write_text("another tenant's code")
    (data / "artifacts").mkdir()
    (data / "artifacts" / "other-tenant.so").write_text("secret")
    hidden = [*planted, other_job / "solution.py", data / "artifacts" / "other-tenant.so"]
    host_shm = _shmget(HOST_SHM_KEY, 4096, 0o1600)
    assert isinstance(host_shm, int) and HOST_SHM_KEY in _host_segments()
    try:
        seen = _run_probe("runner_probe", str(scratch), str(data), json.dumps([str(p) for p in hidden]))
        log = (scratch / "candidate.log").read_text(errors="replace")
        assert "error" not in seen, f"{seen}\n{log}"
        assert seen["proc_pids"] == [seen["pid"]]  # its own procfs: no worker, no other runner
        assert seen["init_cmdline"] == "No such file or directory"
        assert seen["parent_cmdline"] == "No such file or directory"
        assert seen["parent_environ"] == "No such file or directory"
        assert seen["planted_visible"] == []
        assert seen["data_listing"] == ["work"]  # other jobs' scratch and the artifacts are covered
        assert seen["workdir"] == seen["home"] == str(data / "work")
        assert seen["write_scratch"] == "ok" and (scratch / "out.txt").read_text() == "mine"
        assert seen["write_tmp"] == "Read-only file system"
        assert seen["thread_comm"] == "cuda-probe"  # /proc is still writable where the kernel allows it
        assert seen["host_segment"] == "ENOENT"  # an IPC namespace of its own: the worker's segment unseen
        assert isinstance(seen["own_segment"], int)  # its own may be made, and is gone with it:
        assert RUNNER_SHM_KEY not in _host_segments()
        assert seen["matmul"] == [[5.0, 14.0], [14.0, 50.0]]
        # A global OOM takes it before the judge, and it cannot take that back.
        assert seen["oom_score_adj"] == "1000"
        assert seen["lower_oom_score_adj"] == "Permission denied"
        found = memory_group(PROBE_UID)
        if found is not None:  # this machine and CI's have cgroup v1's memory controller
            group, limit_file = found
            assert seen["memory_group"] == str(group)
            assert f"/{group.parent.name}/{group.name}\n" in str(seen["cgroups"])
            assert int((group / limit_file).read_text()) == 3 << 30
            assert seen["leave_group"] in {
                "Permission denied",
                "Read-only file system",
                "No such file or directory",
            }
    finally:
        ctypes.CDLL(None).shmctl(host_shm, 0, None)  # IPC_RMID
        shutil.rmtree(data)


def test_torch_imports_inside_the_view() -> None:
    data = _data_dir()
    workdir = data / "scratch" / "evalsvc-run-fresh"
    workdir.mkdir(parents=True)
    os.chown(workdir, PROBE_UID, PROBE_UID)
    try:
        seen = _run_probe("fresh_import_probe", str(workdir), str(data))
        assert "error" not in seen, seen["error"]
        assert seen == {"torch_before": False, "sum": 16.0}
    finally:
        shutil.rmtree(data)


def _in_child(probe: Callable[[], dict[str, object]]) -> dict[str, object]:
    """Run `probe` in a forked child (its mounts and namespaces die with it) and return its report."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            seen = probe()
        except BaseException as e:
            seen = {"error": "".join(traceback.format_exception(e))}
        os.write(write_end, json.dumps(seen).encode())
        os._exit(0)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read_end, "rb") as report:
        seen = json.loads(report.read() or b"{}")
    assert os.waitstatus_to_exitcode(status) == 0
    assert "error" not in seen, seen["error"]
    return seen


def _as_a_container_runtime_masks_proc() -> None:
    """In this child's own mount namespace, what Docker and Kubernetes put over parts of /proc: /dev/null
    over files such as /proc/timer_list and /proc/kcore, a read-only /proc/sys."""
    if _libc.unshare(CLONE_NEWNS) != 0:
        raise OSError("unshare(CLONE_NEWNS) failed")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("/dev/null", "/proc/timer_list", None, MS_BIND)
    _mount("/proc/sys", "/proc/sys", None, MS_BIND)
    _mount(None, "/proc/sys", None, MS_REMOUNT | MS_BIND | MS_RDONLY)


def test_secret_dirs_and_proc_masks_stay_covered() -> None:
    assert {"/etc/evalsvc", "/run/secrets"} <= set(SECRET_DIRS)
    data = _data_dir()
    workdir = data / "scratch" / "evalsvc-run-mine"
    workdir.mkdir(parents=True)
    # Stands for /etc/evalsvc: /etc is in the view, the operator's secrets under it are not.
    standin = Path(f"/etc/evalsvc-isolation-{secrets.token_hex(8)}")
    standin.mkdir(mode=0o755)
    (standin / "redis-password").write_text("hunter2")
    (standin / "redis-password").chmod(0o644)

    def probe() -> dict[str, object]:
        _as_a_container_runtime_masks_proc()
        private_filesystem_view(str(workdir), str(data), secret_dirs=(str(standin),))
        drop_privileges(PROBE_UID)
        timer_list = os.stat("/proc/timer_list")
        dev_null = os.stat("/dev/null")
        return {
            "etc_passwd": os.path.exists("/etc/passwd"),
            "standin": sorted(os.listdir(standin)),
            "timer_list_is_dev_null": stat.S_ISCHR(timer_list.st_mode)
            and timer_list.st_rdev == dev_null.st_rdev,
            "sys_read_only": bool(os.statvfs("/proc/sys").f_flag & os.ST_RDONLY),
            "proc_writable": not os.statvfs("/proc").f_flag & os.ST_RDONLY,
        }

    try:
        seen = _in_child(probe)
        assert seen == {
            "etc_passwd": True,
            "standin": [],  # covered, though /etc is in the view
            "timer_list_is_dev_null": True,  # the runtime's masks hold in the runner's own procfs
            "sys_read_only": True,
            "proc_writable": True,
        }
    finally:
        shutil.rmtree(standin)
        shutil.rmtree(data)


def test_data_dir_inside_a_needed_directory_is_still_covered() -> None:
    """A development setup: the data directory inside a package the runner imports (in the view)."""
    project = _data_dir()
    needed = project / "evalsvc_probe_helper"
    needed.mkdir()
    (needed / "__init__.py").write_text("VISIBLE = True\n")
    data = needed / "var"
    workdir = data / "scratch" / "evalsvc-run-mine"
    workdir.mkdir(parents=True)
    (data / "artifacts").mkdir()
    (data / "artifacts" / "other-tenant.so").write_text("secret")
    os.chown(workdir, PROBE_UID, PROBE_UID)

    def probe() -> dict[str, object]:
        sys.path.append(str(project))
        importlib.import_module("evalsvc_probe_helper")
        target = private_filesystem_view(str(workdir), str(data))
        drop_privileges(PROBE_UID)
        seen: dict[str, object] = {
            "helper": Path(needed, "__init__.py").exists(),
            "data": sorted(os.listdir(data)),
        }
        _attempt(seen, "write_work", lambda: Path(target, "out.txt").write_text("mine"))
        _attempt(seen, "write_needed", lambda: Path(needed, "out.txt").write_text("x"))
        return seen

    try:
        seen = _in_child(probe)
        assert seen == {
            "helper": True,
            "data": ["work"],
            "write_work": "ok",
            "write_needed": "Read-only file system",
        }
        assert (workdir / "out.txt").read_text() == "mine"
    finally:
        shutil.rmtree(project)


def test_credentials_beside_the_view_stay_out_of_it() -> None:
    """Found by a red team: /etc/default (service environments), pip's configuration in the Python prefix
    (an index token) and an operator's env file beside the code (a project directory on sys.path) were in
    the runner's view."""
    data = _data_dir()
    workdir = data / "scratch" / "evalsvc-run-mine"
    workdir.mkdir(parents=True)
    token = secrets.token_hex(8)
    project = Path(__file__).parents[2]
    assert str(project) in sys.path  # pytest puts the project's root there, as `python -m` does its cwd
    Path("/etc/default").mkdir(exist_ok=True)
    planted = [Path(f"/etc/default/evalsvc-canary-{token}"), project / f".canary-{token}.env"]
    pip_conf = Path(sys.prefix) / "pip.conf"
    if not pip_conf.exists():  # never touch a real one
        planted.append(pip_conf)
    for path in planted:
        path.write_text(f"# {token}\n")
        path.chmod(0o644)

    def probe() -> dict[str, object]:
        private_filesystem_view(str(workdir), str(data))
        drop_privileges(PROBE_UID)
        seen = {}
        for path in planted:
            try:
                seen[str(path)] = Path(path).read_text()
            except OSError as e:
                seen[str(path)] = type(e).__name__
        return {"seen": seen, "evalsvc": os.path.isdir(project / "evalsvc")}

    try:
        result = _in_child(probe)
        assert not any(token in str(v) for v in result["seen"].values()), result  # type: ignore[union-attr]
        assert result["evalsvc"] is True  # what the runner imports from the project is still there
    finally:
        for path in planted:
            path.unlink(missing_ok=True)
        shutil.rmtree(data)
