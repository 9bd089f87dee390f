"""The load_inline flag allowlist: what honest solutions pass is allowed, each refused family is refused.

The honest flags are read from the solution files themselves (their load_inline calls, with `ast`), so a new
example with a new flag fails here until the allowlist takes it or the example changes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from evalsvc.compiler.flags import FLAG_FILE, FLAG_RULE, check_flags
from tests.corpus.reader import header

ROOT = Path(__file__).parents[2]
FLAG_ARGS = ("extra_cflags", "extra_cuda_cflags", "extra_ldflags")
HONEST = [
    *sorted((ROOT / "tests" / "corpus" / "honest").glob("*.py")),
    *sorted(p for p in (ROOT / "evalsvc" / "examples").glob("*/*/*.py") if p.name != "task.py"),
]


def load_inline_flags(py_text: str) -> dict[str, list[str]]:
    """The flag lists a file's load_inline calls pass (list literals, or module-level names bound to them)."""
    tree = ast.parse(py_text)
    names = {
        t.id: stmt.value
        for stmt in tree.body
        if isinstance(stmt, ast.Assign)
        for t in stmt.targets
        if isinstance(t, ast.Name)
    }
    out: dict[str, list[str]] = {arg: [] for arg in FLAG_ARGS}
    for node in ast.walk(tree):
        func = node.func if isinstance(node, ast.Call) else None
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name != "load_inline":
            continue
        for kw in node.keywords:
            value = names.get(kw.value.id, kw.value) if isinstance(kw.value, ast.Name) else kw.value
            if kw.arg in FLAG_ARGS:
                out[kw.arg] += [ast.literal_eval(e) for e in getattr(value, "elts", [value])]
    return out


def _flags(path: Path) -> dict[str, list[str]]:
    return load_inline_flags(path.read_text())


def test_the_honest_files_pass_flags() -> None:
    """The reader finds flags at all (a broken reader would make the next test vacuous)."""
    seen = {flag for p in HONEST for flags in _flags(p).values() for flag in flags}
    assert {"-O3", "-fopenmp", "-fno-trapping-math"} <= seen


@pytest.mark.parametrize("path", HONEST, ids=lambda p: str(p.relative_to(ROOT)))
def test_honest_flags_are_allowed(path: Path) -> None:
    flags = _flags(path)
    allow = header(path).get("allow_vendor_libs") == "true"
    assert check_flags(flags["extra_cflags"], flags["extra_cuda_cflags"], flags["extra_ldflags"], allow) == []


ALLOWED_HOST = [
    "-O0", "-O2", "-O3", "-Os", "-Ofast", "-ffast-math", "-fno-fast-math", "-fno-math-errno",
    "-funroll-loops", "-ffp-contract=fast", "-fopenmp", "-fopenmp-simd", "-fPIC", "-fvisibility=hidden",
    "-std=c++17", "-std=c++20", "-std=gnu++20", "-Wall", "-Wextra", "-Wno-unused-variable", "-Werror",
    "-Werror=return-type", "-w", "-DNDEBUG", "-DTILE=32", "-DEPS=1e-5f", "-DNEG=-1",
    "-U__CUDA_NO_HALF_OPERATORS__", "-g", "-g0", "-pthread", "-march=native", "-mtune=skylake-avx512",
    "-mavx2", "-mfma", "-mno-avx512f", "-mf16c",
]  # fmt: skip
ALLOWED_NVCC = [
    "-O3", "--use_fast_math", "-use_fast_math", "-lineinfo", "--expt-relaxed-constexpr",
    "--expt-extended-lambda", "--extended-lambda", "-ftz=true", "-prec-div=false", "-prec-sqrt=false",
    "-fmad=true", "--restrict", "-maxrregcount=64", "--ptxas-options=-v",
    "-Xptxas=-v,-O3,--warn-on-spills", "-Xcompiler=-fopenmp,-O3", "--compiler-options=-march=native",
    "--diag-suppress=177", "-Xcudafe=--diag_suppress=20012", "-std=c++20", "-DBLOCK=256",
    "-U__CUDA_NO_HALF2_OPERATORS__", "-G", "-g", "-w", "-Wno-deprecated-gpu-targets", "-res-usage",
]  # fmt: skip


@pytest.mark.parametrize("flag", ALLOWED_HOST)
def test_allowed_host_flag(flag: str) -> None:
    assert check_flags([flag], [], [], False) == []


@pytest.mark.parametrize("flag", ALLOWED_NVCC)
def test_allowed_nvcc_flag(flag: str) -> None:
    assert check_flags([], [flag], [], False) == []


def test_separate_values_and_strings_with_spaces() -> None:
    """`-D X` as two items or one, and several flags in one string (split on spaces, as the shell does)."""
    assert check_flags(["-D", "X", "-U", "Y", "-O3 -DX -fopenmp", " -O2  -g "], [], [], False) == []
    nvcc = ["-Xptxas", "-v", "-Xcompiler", "-fopenmp", "-maxrregcount", "32", "-std", "c++17", "-Xptxas -v"]
    assert check_flags([], nvcc, [], False) == []
    assert check_flags([], [], ["-fopenmp -lcuda", "-l", "m"], False) == []


def test_vendor_libraries_only_where_allowed() -> None:
    libs = ["-lcublas", "-lcublasLt", "-l", "cudnn", "-lcudnn_ops", "-lcufft", "-lcusparse", "-lcusolver"]
    assert check_flags([], [], libs, True) == []
    found = check_flags([], [], libs, False)
    assert len(found) == 7 and all("vendor library" in f.message for f in found)


REFUSED = [
    # (list, flag items, words the reason must contain)
    ("c", ["-I/usr/include"], "names a path"),
    ("c", ["-include", "/etc/passwd"], "names a path"),
    ("c", ["-imacros", "x.h"], "names a path"),
    ("c", ["-isystem", "/x"], "names a path"),
    ("c", ["-B/tmp"], "names a path"),
    ("c", ["-specs=/tmp/x"], "names a path"),
    ("c", ["--sysroot=/"], "names a path"),
    ("c", ["-fplugin=/tmp/x.so"], "loads code"),
    ("c", ["-wrapper", "/bin/sh"], "names a path"),
    ("c", ["-o", "/out/sources.json"], "writes a file"),
    ("c", ["@/tmp/args"], "names a path"),
    ("c", ["-save-temps"], "writes a file"),
    ("c", ["-MD"], "writes a file"),
    ("c", ["-MF", "/out/deps"], "writes a file"),
    ("c", ["-fdump-tree-all"], "writes a file"),
    ("c", ["-fprofile-generate"], "writes a file"),
    ("c", ["-x", "c"], "how the source is read"),
    ("c", ["-ansi"], "how the source is read"),
    ("c", ["-trigraphs"], "how the source is read"),
    ("c", ["-std=c++14"], "before C++17"),
    ("c", ["-Wl,-Map=/out/sources.json"], "linker"),
    ("c", ["-Wa,-adhln=/out/x"], "assembler"),
    ("c", ["-Wp,-MD,/out/x"], "preprocessor"),
    ("c", ["-DKNS=at"], "plain macro"),
    ("c", ["-D", "X='1'"], "plain macro"),
    ("c", ["-D__device__="], "redefines `__device__`"),
    ("c", ["-Dprivate=1"], "redefines `private`"),
    ("c", ["-fno-access-control"], "allowlist"),
    ("c", ["-O3;touch /tmp/x"], "allowlist"),
    ("c", ["foo.o"], "not a flag"),
    ("c", ["-O3\n-O2"], "control characters"),
    ("cu", ["-arch=sm_90"], "target"),
    ("cu", ["-gencode", "arch=compute_90,code=sm_90"], "target"),
    ("cu", ["--gpu-architecture=sm_80"], "target"),
    ("cu", ["-code=sm_90"], "target"),
    ("cu", ["-rdc=true"], "target"),
    ("cu", ["--relocatable-device-code", "true"], "target"),
    ("cu", ["-Xnvlink", "--foo"], "linker"),
    ("cu", ["--keep"], "target"),
    ("cu", ["--keep-dir", "/out"], "target"),
    ("cu", ["-ccbin", "/tmp/cc"], "toolchain"),
    ("cu", ["--compiler-bindir=/tmp"], "toolchain"),
    ("cu", ["--default-stream", "per-thread"], "service sets"),
    ("cu", ["-Xptxas", "-o,/tmp/x"], "ptxas"),
    ("cu", ["-Xcompiler", "-Wl,-rpath,/tmp"], "host compiler"),
    ("cu", ["-Xcompiler=-fplugin=x.so"], "host compiler"),
    ("cu", ["--options-file", "/tmp/x"], "names a path"),
    ("ld", ["-Wl,-Map=/out/sources.json"], "linker"),
    ("ld", ["-Xlinker", "--wrap=malloc"], "linker"),
    ("ld", ["-L/tmp"], "names a path"),
    ("ld", ["-lnvrtc"], "outside the allowlist"),
    ("ld", ["-l:libx.so"], "outside the allowlist"),
    ("ld", ["-shared"], "build steps"),
    ("ld", ["-T", "/tmp/script.ld"], "linker"),
    ("ld", ["-fuse-ld=/tmp/ld"], "toolchain"),
    ("ld", ["/tmp/libx.a"], "not a flag"),
]


@pytest.mark.parametrize(("where", "flags", "why"), REFUSED, ids=lambda v: str(v)[:40])
def test_refused_flag(where: str, flags: list[str], why: str) -> None:
    lists = {"c": ([], [], []), "cu": ([], [], []), "ld": ([], [], [])}[where]
    lists[["c", "cu", "ld"].index(where)].extend(flags)
    found = check_flags(*lists, allow_vendor_libs=True)
    assert found, flags
    f = found[0]
    assert (f.rule, f.file, f.line) == (FLAG_RULE, FLAG_FILE, 0)
    assert why in f.message, f.message
    assert "allowed:" in f.message  # says what is allowed instead


def test_a_refused_flag_takes_its_value_along() -> None:
    """`-include /etc/passwd` is one finding that names both, not a second one for the path."""
    (f,) = check_flags(["-include", "/etc/passwd", "-O3"], [], [], False)
    assert f.message.startswith("extra_cflags: `-include /etc/passwd` ")
