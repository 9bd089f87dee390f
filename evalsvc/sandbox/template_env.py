"""The runner template starts through `execve` with an explicit minimal environment.

Every runner is forked from the multiprocessing forkserver (the warm template), so its memory, its
initial environment block and `/proc/self/environ` are the template's. Python starts the forkserver with
the starting process's environment, which on a worker holds whatever the operator's deployment put there
(Redis passwords, cloud credentials, API keys). The template is therefore started through a wrapper that
replaces the whole environment with the names below (what Python, torch, CUDA and Triton read; none of
them a credential), so no runner can find a secret in memory it inherited.
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import re
import shlex
import shutil
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

# What the interpreter, the dynamic linker, CUDA, torch and Triton read at import or device start: names,
# not prefixes (a red team carried a password in TRITON_REMOTE_CACHE_URL through a kept prefix).
KEEP_NAMES = frozenset(
    {
        "PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ",
        "PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONHASHSEED", "VIRTUAL_ENV",
        "LD_LIBRARY_PATH", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
        "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_MODULE_LOADING",
        "CUDA_LAUNCH_BLOCKING", "CUDA_CACHE_DISABLE", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
        "TRITON_INTERPRET", "TRITON_PTXAS_PATH", "TRITON_LIBCUDA_PATH", "TORCH_CUDA_ARCH_LIST",
    }
)  # fmt: skip
# A value with credentials in it (scheme://user:password@host) is dropped whatever its name.
CREDENTIAL_URL = re.compile(r"://[^/@\s]*:[^/@\s]*@")

_lock = threading.Lock()
_wrapper: Path | None = None


def template_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The only variables the runner template (and Nsight Compute's target) starts with."""
    return {k: v for k, v in environ.items() if k in KEEP_NAMES and not CREDENTIAL_URL.search(v)}


def use_clean_template(ctx: mp.context.BaseContext) -> None:
    """Make `ctx` (the forkserver context) start its server through `env -i` with the minimal
    environment. Once per process, before the first runner starts; idempotent."""
    global _wrapper
    with _lock:
        if _wrapper is None:
            _wrapper = _write_wrapper(template_environment(os.environ))
        ctx.set_executable(str(_wrapper))


def _write_wrapper(env: Mapping[str, str]) -> Path:
    envbin = shutil.which("env") or "/usr/bin/env"
    assigns = " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(env.items()))
    script = f'#!/bin/sh\nexec {shlex.quote(envbin)} -i {assigns} {shlex.quote(sys.executable)} "$@"\n'
    # A directory only this process's user can write: the wrapper runs with the worker's privileges.
    directory = Path(tempfile.mkdtemp(prefix="evalsvc-template-"))
    path = directory / "python"
    path.write_text(script)
    path.chmod(0o700)
    atexit.register(shutil.rmtree, directory, True)
    return path
