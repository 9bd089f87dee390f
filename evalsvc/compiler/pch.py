"""Precompiled torch/extension.h: the part of every load_inline build that is the same for all solutions.

Built once per toolchain and flag set by trusted code, then mounted read-only into compile jobs: gcc finds
`<dir>/torch/extension.h.gch` ahead of the real header and uses it when the flags match, else falls back.
Run as `python -m evalsvc.compiler.pch OUT [FLAGSET_JSON ...]`.
"""

from __future__ import annotations

import fcntl
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from evalsvc.core.hashing import content_hash

# The flag sets most load_inline solutions use (KernelBench CPU solutions add OpenMP).
DEFAULT_FLAGSETS: list[list[str]] = [[], ["-O3"], ["-O3", "-fopenmp"]]


def pch_subdir(extra_cflags: list[str]) -> str:
    return "f" + content_hash([f.strip() for f in extra_cflags], length=12)


def _cxx_cflags(extra_cflags: list[str], scratch: Path) -> list[str]:
    """The exact flags torch's ninja writer uses for a C++ source, less the per-extension name."""
    from evalsvc.compiler.ninja_build import ExtensionBuild, write_ninja_file

    src = scratch / "probe.cpp"
    src.write_text("")
    write_ninja_file(ExtensionBuild("pch_probe", [src], scratch, extra_cflags, [], [], [], False))
    for line in (scratch / "build.ninja").read_text().splitlines():
        if line.startswith("cflags = "):
            flags = shlex.split(line[len("cflags = ") :])
            return [f for f in flags if not f.startswith("-DTORCH_EXTENSION_NAME=")]
    raise RuntimeError("torch's ninja file has no cflags line")


def build_pch(out: Path, extra_cflags: list[str]) -> Path:
    from evalsvc.compiler.ninja_build import torch_include_dir

    header = torch_include_dir() / "torch" / "extension.h"
    target = out / pch_subdir(extra_cflags) / "torch" / "extension.h.gch"
    target.parent.mkdir(parents=True, exist_ok=True)
    # A compile worker's pool children start together on a fresh data directory and each asks for the
    # headers: one builds them, the others wait for it (all of them renaming one `.partial` failed the
    # first jobs of a fresh H200 stack with "No such file or directory").
    with open(target.parent / ".build.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # gcc resolves a second `#include <torch/extension.h>` (load_inline adds one, most solutions
        # another) in this directory too, and a PCH serves only the first: this stub hands it on to the
        # real header, whose `#pragma once` the PCH already carries. Without a usable PCH it simply
        # includes the header.
        stub = target.with_suffix("")
        if not stub.exists():
            stub.write_text("#pragma once\n#include_next <torch/extension.h>\n")
        if target.exists():
            return target
        with tempfile.TemporaryDirectory() as tmp:
            flags = _cxx_cflags(extra_cflags, Path(tmp))
            partial = target.with_suffix(".gch.partial")
            subprocess.run(
                ["c++", "-x", "c++-header", str(header), "-o", str(partial), *flags],
                check=True,
                capture_output=True,
                timeout=600,
            )
            partial.rename(target)
    return target


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    flagsets = [json.loads(a) for a in argv[1:]] or DEFAULT_FLAGSETS
    for flags in flagsets:
        print(build_pch(out, flags))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
