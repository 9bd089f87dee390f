"""The runner's private filesystem view, in a real child process with real mount and network namespaces."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import traceback
from pathlib import Path

import pytest

from evalsvc.sandbox.isolation import drop_privileges, private_filesystem_view, unshare_network

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root")


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

    from evalsvc.engine.runner import runner_environment

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
