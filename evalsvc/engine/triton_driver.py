"""Triton's CUDA driver module for a GPU worker's runners, built once by a trusted process.

Triton builds a small C module (`cuda_utils`, its launch and load calls) with the host compiler the first
time a process launches a kernel. A runner may not start a compiler (its seccomp filter refuses exec), so
the judge builds that module once per worker, from Triton's own sources only, in a process of its own, and
hands a copy to every runner of a Triton artifact inside the artifact's cache (triton_runtime.py seeds the
runner's cache from it). Versions of Triton that build a launcher per kernel signature are not covered:
such a kernel fails at its first launch in the runner (a runtime error naming the compiler).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

log = logging.getLogger(__name__)

BUILD_SECONDS = 180.0
_BUILD = "import triton; triton.runtime.driver.active.utils"  # constructs CudaUtils: compiles, loads
_lock = threading.Lock()
_built: list[Path | None] = []


def driver_cache() -> Path | None:
    """The cache directory holding Triton's built driver module (built on this process's first call, in a
    directory of its own that no runner can write; None where it could not be built, reason logged)."""
    with _lock:
        if not _built:
            _built.append(_build(Path(tempfile.mkdtemp(prefix="evalsvc-triton-driver-"))))
        return _built[0]


def _build(dest: Path) -> Path | None:
    env = {**os.environ, "TRITON_CACHE_DIR": str(dest)}
    env.pop("TRITON_INTERPRET", None)
    try:
        done = subprocess.run(
            [sys.executable, "-c", _BUILD], env=env, capture_output=True, text=True, timeout=BUILD_SECONDS
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        log.warning("Triton's driver module could not be built: %s", e)
        return None
    if done.returncode != 0 or not any(dest.rglob("*.so")):
        log.warning("Triton's driver module could not be built: %s", done.stderr[-2000:])
        return None
    return dest


def add_driver(artifact_cache: Path, driver: Path) -> None:
    """The driver module's cache entries beside a Triton artifact's kernels (the runner's copy)."""
    for entry in driver.iterdir():
        if entry.is_dir() and not (artifact_cache / entry.name).exists():
            shutil.copytree(entry, artifact_cache / entry.name, symlinks=False)
