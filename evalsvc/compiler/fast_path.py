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
`fastpath/flags.json` (torch's flags for this toolchain, with torch's include directories left out), the
two bridge objects and the shim precompiled for C++ units (gcc uses it only where the unit's flags and
macros match, and the object is then byte for byte the one it makes without). The build job only reads
them: it imports nothing of torch.
"""

from __future__ import annotations

import contextlib
import fcntl
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
# The shim's precompiled variants; gcc takes the first whose macros match (-O1 to -O3 share __OPTIMIZE__).
_PCH_OPT = {"O0": [], "O2": ["-O2"]}


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
    linker: list[str]  # gold where the toolchain has it: it reads torch's symbol tables faster than bfd
    nvcc: str


@functools.cache
def version() -> str:
    """Names the prepared files after the code that makes them, so a changed shim or flag rule is rebuilt."""
    texts = [p.read_text() for p in [Path(__file__), *sorted(SHIM_DIR.rglob("*"))] if p.is_file()]
    return content_hash(texts, length=12)


def _files(root: Path) -> tuple[Path, dict[bool, Path]]:
    d = root / SUBDIR / version()
    return d / "flags.json", {False: d / "bridge.o", True: d / "bridge_cuda.o"}


def _pch_dir(root: Path) -> Path:
    """An include directory ahead of the shim's, holding `torch/extension.h.gch/<variant>.gch`."""
    return root / SUBDIR / version() / "pch"


def ready(root: Path) -> bool:
    """Everything `prepare` writes is there (flags.json last)."""
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
    """Write the flags, the bridge objects, the stubs and the precompiled shim (trusted side, once per
    toolchain). Workers that start together on a fresh data directory each ask: one prepares, the others
    wait for it (two writing one `.partial` fail each other)."""
    flags_file = _files(root)[0]
    flags_file.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(PermissionError):  # another sandbox user makes the next version's directory
        (root / SUBDIR).chmod(0o777)
    with open(flags_file.parent / ".prepare.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready(root):
            _prepare(root)
    return flags_file.parent


def _prepare(root: Path) -> None:
    from evalsvc.compiler.ninja_build import cuda_arch_flags

    flags_file, bridges = _files(root)
    with tempfile.TemporaryDirectory() as tmp:
        cpu = _ninja_vars(False, Path(tmp) / "cpu")
        cuda = _ninja_vars(True, Path(tmp) / "cuda")
    cxx_pre_cpu, cxx_post_cpu = _split(_without_torch(cpu["cflags"]), [])
    cxx_pre_cuda, cxx_post_cuda = _split(_without_torch(cuda["cflags"]), [])
    nvcc_pre, nvcc_post = _split(_without_torch(cuda["cuda_cflags"]), cuda_arch_flags("90a"))
    stubs = flags_file.parent / "stubs"
    _write_stubs(stubs, [*cpu["ldflags"], *cuda["ldflags"]])
    for with_cuda, target in bridges.items():
        full = [f for f in (cuda if with_cuda else cpu)["cflags"] if f != _SENTINEL]
        full = [f for f in full if not f.startswith("-DTORCH_EXTENSION_NAME=")]
        partial = target.with_suffix(".partial")
        cmd = ["c++", "-c", str(SHIM_DIR / "bridge.cpp"), "-o", str(partial), *full, "-O2"]
        if with_cuda:
            cmd.append("-DEVALSVC_SHIM_CUDA")
        subprocess.run(cmd, check=True, capture_output=True, timeout=900)
        partial.rename(target)
    flags = Flags(
        cxx_pre_cpu=cxx_pre_cpu,
        cxx_post_cpu=cxx_post_cpu,
        cxx_pre_cuda=cxx_pre_cuda,
        cxx_post_cuda=cxx_post_cuda,
        nvcc_pre=nvcc_pre,
        nvcc_post=nvcc_post,
        ldflags_cpu=_stubbed(cpu["ldflags"], stubs),
        ldflags_cuda=_stubbed(cuda["ldflags"], stubs),
        linker=_linker(bridges[False], cpu["ldflags"]),
        nvcc=(cuda.get("nvcc") or ["nvcc"])[0],
    )
    _precompile_shim(_pch_dir(root), flags)
    flags_file.write_text(json.dumps(flags.__dict__))


def _torch_libs(ldflags: list[str]) -> tuple[str, list[str]]:
    """torch's library directory (the first -L) and the names it links from there."""
    lib_dir = next(f[2:] for f in ldflags if f.startswith("-L"))
    names = [f[2:] for f in ldflags if f.startswith("-l") and (Path(lib_dir) / f"lib{f[2:]}.so").is_file()]
    return lib_dir, names


def _write_stubs(stubs: Path, ldflags: list[str]) -> None:
    """An empty library per torch library, under the real one's soname: the link records the same
    DT_NEEDED entries without reading torch's symbol tables (most of a link's time); the loader binds the
    symbols to the real libraries, as it does for the build as written, whose link leaves them undefined
    all the same (a shared library may)."""
    lib_dir, names = _torch_libs(ldflags)
    stubs.mkdir(parents=True, exist_ok=True)
    for name in dict.fromkeys(names):
        real = Path(lib_dir) / f"lib{name}.so"
        dynamic = subprocess.run(["objdump", "-p", str(real)], check=True, capture_output=True, text=True)
        soname = re.search(r"(?m)^\s*SONAME\s+(\S+)", dynamic.stdout)
        name_flag = f"-Wl,-soname,{soname.group(1) if soname else real.name}"
        cmd = ["c++", "-shared", "-x", "c", "/dev/null", name_flag, "-o", str(stubs / real.name)]
        subprocess.run(cmd, check=True, capture_output=True, timeout=60)


def _stubbed(ldflags: list[str], stubs: Path) -> list[str]:
    """torch's ldflags, in their order, with its libraries taken from the stubs and each kept as a
    dependency (`--no-as-needed`, as Debian's default and unlike Ubuntu's)."""
    lib_dir, names = _torch_libs(ldflags)
    out: list[str] = []
    for f in ldflags:
        out += ["-Wl,--push-state,--no-as-needed", f"-L{stubs}"] if f == f"-L{lib_dir}" else [f]
        if f == f"-l{names[-1]}":
            out.append("-Wl,--pop-state")
    return out


def _linker(bridge: Path, ldflags: list[str]) -> list[str]:
    """`-fuse-ld=gold` when this toolchain links the bridge with it, else the default linker."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["c++", str(bridge), *ldflags, "-fuse-ld=gold", "-o", str(Path(tmp) / "probe.so")]
        gold = subprocess.run(cmd, capture_output=True, timeout=300).returncode == 0
    return ["-fuse-ld=gold"] if gold else []


def _precompile_shim(pch: Path, flags: Flags) -> None:
    """`torch/extension.h.gch/`, one variant per unit kind and optimisation macro set, and a stub header."""
    gch = pch / "torch" / "extension.h.gch"
    gch.mkdir(parents=True, exist_ok=True)
    # A second `#include <torch/extension.h>` looks in this directory too and finds no header without it.
    (pch / "torch" / "extension.h").write_text("#pragma once\n#include_next <torch/extension.h>\n")
    for with_cuda in (False, True):
        pre, post = (
            (flags.cxx_pre_cuda, flags.cxx_post_cuda)
            if with_cuda
            else (flags.cxx_pre_cpu, flags.cxx_post_cpu)
        )
        for opt, opt_flags in _PCH_OPT.items():
            target = gch / f"{'cuda' if with_cuda else 'cpu'}-{opt}.gch"
            partial = target.with_suffix(".partial")
            header = str(SHIM_INCLUDE / "torch" / "extension.h")
            cmd = [
                "c++",
                *_shim_flags(with_cuda),
                *pre,
                *opt_flags,
                *post,
                "-x",
                "c++-header",
                header,
                "-o",
                str(partial),
            ]
            subprocess.run(cmd, check=True, capture_output=True, timeout=300)
            partial.rename(target)


def _shim_flags(with_cuda: bool) -> list[str]:
    return ["-I", str(SHIM_INCLUDE), *(["-DEVALSVC_SHIM_CUDA"] if with_cuda else [])]


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
    pch: Path,
    with_cuda: bool,
) -> str:
    shim = [*_shim_flags(with_cuda), f"-DTORCH_EXTENSION_NAME={name}"]
    q = shlex.join
    cflags, cuda_cflags = [f for f in cflags if f.strip()], [f for f in cuda_cflags if f.strip()]
    cxx_pre, cxx_post = (
        (flags.cxx_pre_cuda, flags.cxx_post_cuda) if with_cuda else (flags.cxx_pre_cpu, flags.cxx_post_cpu)
    )
    torch_ldflags = flags.ldflags_cuda if with_cuda else flags.ldflags_cpu
    lines = [
        "ninja_required_version = 1.3",
        f"cflags = {q(['-I', str(pch), *shim, *cxx_pre, *cflags, *cxx_post])}",
        f"cuda_cflags = {q([*shim, *flags.nvcc_pre, *cuda_cflags, *flags.nvcc_post])}",
        f"ldflags = {q([*flags.linker, *torch_ldflags, *ldflags])}",
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
        _ninja_file(
            name, sources, objects, flags, cflags, cuda_cflags, ldflags, bridge, _pch_dir(root), with_cuda
        )
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
