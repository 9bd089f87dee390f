"""The toolchain fingerprint: what an artifact was built with, so it only runs where it fits."""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys

from pydantic import BaseModel

from evalsvc.core.hashing import content_hash

BUILDER_VERSION = "1"


class Toolchain(BaseModel):
    python: str
    torch: str
    torch_cuda: str | None
    nvcc: str | None
    cxx: str | None
    machine: str
    builder: str = BUILDER_VERSION
    triton: str | None = None  # Triton's version: it compiles a Triton solution's kernels ahead

    @property
    def hash(self) -> str:
        return content_hash(self.model_dump(mode="json"), length=16)

    def runtime_view(self) -> tuple[str, str, str | None, str]:
        """What must match at run time: the interpreter, torch and its CUDA, the machine."""
        return (self.python, self.torch, self.torch_cuda, self.machine)


def _first_line(cmd: list[str], pick_last: bool = False) -> str | None:
    if not shutil.which(cmd[0]):
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return None
    if not out:
        return None
    return out[-1] if pick_last else out[0]


def current_toolchain() -> Toolchain:
    import torch
    from torch.utils.cpp_extension import CUDA_HOME

    nvcc = f"{CUDA_HOME}/bin/nvcc" if CUDA_HOME else "nvcc"
    return Toolchain(
        python=".".join(map(str, sys.version_info[:3])),
        torch=torch.__version__,
        torch_cuda=torch.version.cuda,
        nvcc=_first_line([nvcc, "--version"], pick_last=True),
        cxx=_first_line(["c++", "--version"]),
        machine=platform.machine(),
        triton=_triton_version(),
    )


def _triton_version() -> str | None:
    """Triton's version from its installed metadata (importing it is slow and unneeded here)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("triton")
    except PackageNotFoundError:
        return None


def runtime_toolchain_view() -> tuple[str, str, str | None, str]:
    """The run-time half of the fingerprint, without calling any compiler."""
    import torch

    return (
        ".".join(map(str, sys.version_info[:3])),
        torch.__version__,
        torch.version.cuda,
        platform.machine(),
    )
