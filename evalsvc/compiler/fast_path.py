"""The fast path: build a load_inline extension against a small stand-in for torch's headers.

Most of a cold build is the compiler reading torch (`torch/extension.h` is ~430k preprocessed lines, read
once per C++ unit and three times per `.cu`). A kernel's host code needs little of it: tensor metadata and
data pointers, allocation and the view operators the object screen allows, TORCH_CHECK, the dispatch
macros, the current stream. `shim/include` declares that (`evalsvc_torch_shim.h`, under the header names
solutions include); `shim/bridge.cpp`, built once per toolchain against the real headers, implements it
over ATen and makes the Python module from the binding unit's `m.def`s. The candidate's units and the
generated binding unit are compiled against the shim with torch's own flags otherwise; the library is
the bridge's object linked with them, against torch's libraries as usual.

Whatever the shim lacks does not compile; the build job then builds the extension as written (the
reason goes in the compile report). The fast path never decides a verdict: a candidate that builds here
calls the same ATen functions through the bridge that its host code would call inline.

`prepare` runs once per toolchain on the trusted side (with the precompiled headers): it writes
`fastpath/flags.json` (torch's flags for this toolchain, with torch's include directories left out) and
the two bridge objects. The build job only reads them: it imports nothing of torch.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from evalsvc.core.hashing import content_hash

SHIM_DIR = Path(__file__).parent / "shim"
SHIM_INCLUDE = SHIM_DIR / "include"
SUBDIR = "fastpath"
_SENTINEL = "-DEVALSVC_FLAG_SLOT"
_ERROR = re.compile(r"(?m)^.*\berror\b.*$")


@dataclass(frozen=True)
class Flags:
    """torch's flags for an extension, split around where the extension's own flags go."""

    cxx_pre_cpu: list[str]
    cxx_post_cpu: list[str]
    cxx_pre_cuda: list[str]  # a C++ unit of an extension with CUDA sources sees CUDA's headers
    cxx_post_cuda: list[str]
    nvcc_pre: list[str]
    nvcc_post: list[str]
    ldflags_cpu: list[str]
    ldflags_cuda: list[str]
    nvcc: str


@functools.cache
def version() -> str:
    """Names the prepared files after the code that makes them, so a changed shim or flag rule is rebuilt."""
    texts = [p.read_text() for p in [Path(__file__), *sorted(SHIM_DIR.rglob("*"))] if p.is_file()]
    return content_hash(texts, length=12)


def _files(root: Path) -> tuple[Path, dict[bool, Path]]:
    d = root / SUBDIR / version()
    return d / "flags.json", {False: d / "bridge.o", True: d / "bridge_cuda.o"}


def ready(root: Path) -> bool:
    flags, bridges = _files(root)
    return flags.is_file() and all(b.is_file() for b in bridges.values())


def load_flags(root: Path) -> Flags:
    return Flags(**json.loads(_files(root)[0].read_text()))


def _ninja_vars(with_cuda: bool, scratch: Path) -> dict[str, list[str]]:
    """The variables torch's ninja writer sets for a probe extension with a slot for the own flags."""
    from evalsvc.compiler.ninja_build import ExtensionBuild, cuda_arch_flags, write_ninja_file

    scratch.mkdir(parents=True, exist_ok=True)
    src = [scratch / "probe.cpp", *([scratch / "probe.cu"] if with_cuda else [])]
    for s in src:
        s.write_text("")
    cuda = [_SENTINEL, *cuda_arch_flags("90a")] if with_cuda else []
    write_ninja_file(ExtensionBuild("probe", src, scratch, [_SENTINEL], cuda, [], [], with_cuda))
    out: dict[str, list[str]] = {}
    for line in (scratch / "build.ninja").read_text().splitlines():
        name, eq, value = line.partition(" = ")
        if eq and name in ("cflags", "cuda_cflags", "ldflags", "nvcc"):
            out[name] = shlex.split(value)
    return out


def _without_torch(flags: list[str]) -> list[str]:
    """Drop the extension name and torch's and Python's include directories (the shim stands in)."""
    from torch.utils.cpp_extension import include_paths

    gone = set(include_paths("cpu"))  # torch's own (CUDA's, which include_paths("cuda") adds, stay)
    gone.add(__import__("sysconfig").get_paths()["include"])
    kept: list[str] = []
    skip = False
    for i, f in enumerate(flags):
        if skip:
            skip = False
            continue
        if f.startswith("-DTORCH_EXTENSION_NAME="):
            continue
        if f in ("-isystem", "-I") and i + 1 < len(flags) and flags[i + 1] in gone:
            skip = True
            continue
        kept.append(f)
    return kept


def _split(flags: list[str], drop: list[str]) -> tuple[list[str], list[str]]:
    i = flags.index(_SENTINEL)
    post = [f for f in flags[i + 1 :] if f not in drop]
    return flags[:i], post


def prepare(root: Path) -> Path:
    """Write the flags and build the bridge objects (trusted side, once per toolchain)."""
    from evalsvc.compiler.ninja_build import cuda_arch_flags

    flags_file, bridges = _files(root)
    flags_file.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(PermissionError):  # another sandbox user makes the next version's directory
        (root / SUBDIR).chmod(0o777)
    with tempfile.TemporaryDirectory() as tmp:
        cpu = _ninja_vars(False, Path(tmp) / "cpu")
        cuda = _ninja_vars(True, Path(tmp) / "cuda")
    cxx_pre_cpu, cxx_post_cpu = _split(_without_torch(cpu["cflags"]), [])
    cxx_pre_cuda, cxx_post_cuda = _split(_without_torch(cuda["cflags"]), [])
    nvcc_pre, nvcc_post = _split(_without_torch(cuda["cuda_cflags"]), cuda_arch_flags("90a"))
    flags = Flags(
        cxx_pre_cpu=cxx_pre_cpu,
        cxx_post_cpu=cxx_post_cpu,
        cxx_pre_cuda=cxx_pre_cuda,
        cxx_post_cuda=cxx_post_cuda,
        nvcc_pre=nvcc_pre,
        nvcc_post=nvcc_post,
        ldflags_cpu=cpu["ldflags"],
        ldflags_cuda=cuda["ldflags"],
        nvcc=(cuda.get("nvcc") or ["nvcc"])[0],
    )
    for with_cuda, target in bridges.items():
        full = [f for f in (cuda if with_cuda else cpu)["cflags"] if f != _SENTINEL]
        full = [f for f in full if not f.startswith("-DTORCH_EXTENSION_NAME=")]
        partial = target.with_suffix(".partial")
        cmd = ["c++", "-c", str(SHIM_DIR / "bridge.cpp"), "-o", str(partial), *full, "-O2"]
        if with_cuda:
            cmd.append("-DEVALSVC_SHIM_CUDA")
        subprocess.run(cmd, check=True, capture_output=True, timeout=900)
        partial.rename(target)
    flags_file.write_text(json.dumps(flags.__dict__))
    return flags_file.parent


@dataclass
class FastBuild:
    ok: bool
    library: Path | None
    log: str
    timed_out: bool
    duration_s: float
    reason: str | None  # why it did not build (the first compiler error), for the compile report


def _ninja_file(
    name: str,
    sources: list[Path],
    objects: list[str],
    flags: Flags,
    cflags: list[str],
    cuda_cflags: list[str],
    ldflags: list[str],
    bridge: Path,
    with_cuda: bool,
) -> str:
    shim = ["-I", str(SHIM_INCLUDE), f"-DTORCH_EXTENSION_NAME={name}"]
    if with_cuda:
        shim.append("-DEVALSVC_SHIM_CUDA")
    q = shlex.join
    cflags, cuda_cflags = [f for f in cflags if f.strip()], [f for f in cuda_cflags if f.strip()]
    cxx_pre, cxx_post = (
        (flags.cxx_pre_cuda, flags.cxx_post_cuda) if with_cuda else (flags.cxx_pre_cpu, flags.cxx_post_cpu)
    )
    lines = [
        "ninja_required_version = 1.3",
        f"cflags = {q([*shim, *cxx_pre, *cflags, *cxx_post])}",
        f"cuda_cflags = {q([*shim, *flags.nvcc_pre, *cuda_cflags, *flags.nvcc_post])}",
        f"ldflags = {q([*(flags.ldflags_cuda if with_cuda else flags.ldflags_cpu), *ldflags])}",
        "rule compile",
        "  command = c++ $cflags -c $in -o $out",
        "rule cuda_compile",
        f"  command = {shlex.quote(flags.nvcc)} $cuda_cflags -c $in -o $out",
        "rule link",
        "  command = c++ $in $ldflags -o $out",
    ]
    for src, obj in zip(sources, objects, strict=True):
        rule = "cuda_compile" if src.suffix == ".cu" else "compile"
        lines.append(f"build {obj}: {rule} {src}")
    lines.append(f"build {name}.so: link {' '.join(objects)} {bridge}")
    lines.append(f"default {name}.so")
    return "\n".join(lines) + "\n"


def build(
    name: str,
    sources: list[Path],
    objects: list[str],
    build_dir: Path,
    root: Path,
    cflags: list[str],
    cuda_cflags: list[str],
    ldflags: list[str],
    with_cuda: bool,
    timeout_s: float,
    jobs: int | None,
) -> FastBuild:
    """Build against the shim, in `build_dir`, with the objects named as torch's ninja writer names them."""
    from evalsvc.compiler.ninja_build import run_ninja  # torch-free: it only runs ninja

    start = time.monotonic()
    build_dir.mkdir(parents=True, exist_ok=True)
    flags = load_flags(root)
    bridge = _files(root)[1][with_cuda]
    (build_dir / "build.ninja").write_text(
        _ninja_file(name, sources, objects, flags, cflags, cuda_cflags, ldflags, bridge, with_cuda)
    )
    code, log, timed_out = run_ninja(build_dir, timeout_s, jobs)
    lib = build_dir / f"{name}.so"
    ok = code == 0 and lib.exists()
    reason = None
    if not ok:
        first = _ERROR.search(log)
        reason = "timed out" if timed_out else (first.group(0).strip()[:300] if first else "did not build")
    return FastBuild(ok, lib if ok else None, log, timed_out, time.monotonic() - start, reason)


if __name__ == "__main__":  # python -m evalsvc.compiler.fast_path OUT: the one-time preparation
    print(prepare(Path(sys.argv[1])))
