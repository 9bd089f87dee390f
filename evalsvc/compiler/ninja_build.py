"""Build one extension with ninja, the way load_inline would, but bounded and with its output kept.

Flags come from torch's own ninja writer, so artifacts are ABI-identical to what `load_inline` builds;
running ninja ourselves adds the time limit, the captured log and the ptxas resource report.
"""

from __future__ import annotations

import inspect
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ExtensionBuild:
    """One shared library to build from source files."""

    name: str
    sources: list[Path]
    build_dir: Path
    cflags: list[str]
    cuda_cflags: list[str]
    ldflags: list[str]
    include_dirs: list[Path]
    with_cuda: bool


@dataclass
class BuildOutcome:
    ok: bool
    library: Path | None
    log: str
    timed_out: bool
    duration_s: float


def cuda_arch_flags(arch: str) -> list[str]:
    """'90a' -> machine code for sm_90a plus its PTX; arch-specific ('a') targets enable wgmma/TMA."""
    return [
        f"-gencode=arch=compute_{arch},code=sm_{arch}",
        f"-gencode=arch=compute_{arch},code=compute_{arch}",
    ]


def torch_include_dir() -> Path:
    """torch's own header directory (`torch/extension.h`, `ATen/ops/*.h`)."""
    from torch.utils import cpp_extension as cx  # here, not at import: the fast path runs ninja without torch

    return Path(cx.include_paths("cpu")[0])


def vendor_include_flags() -> list[str]:
    """`-isystem` for the headers of CUDA's libraries in NVIDIA's pip wheels (`nvidia/*/include`).

    torch's own headers include them (`ATen/cuda/CUDAContext.h`, which most CUDA solutions include for
    the current stream, includes `cusparse.h` and `cublas_v2.h`), and a toolkit of nvcc and the runtime
    alone lacks them. They come after torch's and CUDA_HOME's include directories, so a full toolkit's
    headers win.
    """
    try:
        import nvidia  # the namespace package of NVIDIA's wheels, installed with a CUDA build of torch
    except ImportError:
        return []
    dirs = sorted({p for root in nvidia.__path__ for p in Path(root).glob("*/include") if p.is_dir()})
    return [f"-isystem {d}" for d in dirs]


def _call_with_known_kwargs(fn, **kwargs):
    """torch's private helpers gained parameters over versions (SYCL); pass only what this one takes."""
    params = inspect.signature(fn).parameters
    return fn(**{k: v for k, v in kwargs.items() if k in params})


def write_ninja_file(b: ExtensionBuild) -> None:
    from torch.utils import cpp_extension as cx

    b.build_dir.mkdir(parents=True, exist_ok=True)
    ldflags = _call_with_known_kwargs(
        cx._prepare_ldflags,
        extra_ldflags=list(b.ldflags),
        with_cuda=b.with_cuda,
        with_sycl=False,
        verbose=False,
        is_standalone=False,
    )
    vendor = vendor_include_flags() if b.with_cuda else []
    _call_with_known_kwargs(
        cx._write_ninja_file_to_build_library,
        path=str(b.build_dir / "build.ninja"),
        name=b.name,
        sources=[str(s) for s in b.sources],
        extra_cflags=[*b.cflags, *vendor],
        extra_cuda_cflags=[*b.cuda_cflags, *vendor],
        extra_sycl_cflags=[],
        extra_ldflags=ldflags,
        extra_include_paths=[str(p) for p in b.include_dirs],
        with_cuda=b.with_cuda,
        with_sycl=False,
        is_standalone=False,
    )


def run_ninja(build_dir: Path, timeout_s: float, jobs: int | None = None) -> tuple[int | None, str, bool]:
    """Run ninja in its own process group; kill the whole group at the time limit."""
    cmd = ["ninja", "-C", str(build_dir)]
    if jobs:
        cmd += ["-j", str(jobs)]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        text=True,
        errors="replace",
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        return proc.returncode, out, False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out, True


def build_extension(b: ExtensionBuild, timeout_s: float, jobs: int | None = None) -> BuildOutcome:
    start = time.monotonic()
    write_ninja_file(b)
    code, log, timed_out = run_ninja(b.build_dir, timeout_s, jobs)
    lib = b.build_dir / f"{b.name}.so"
    ok = code == 0 and lib.exists()
    return BuildOutcome(ok, lib if ok else None, log, timed_out, time.monotonic() - start)
