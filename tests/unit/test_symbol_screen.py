"""The object-level screen (evalsvc.compiler.symbol_screen) over objects compiled by the real toolchain.

Honest candidates (their own C++/CUDA, without bindings) are compiled with g++/nvcc against torch's headers
and must pass with no findings; hostile ones are tiny translation units that must be refused by the right
rule. Compiled objects are cached under CACHE, keyed by a hash of (source, flags, compiler version), so
only the first run pays for the torch-header compiles (one to five minutes each on a small, shared machine).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from evalsvc.compiler.symbol_screen import (
    ALLOWED_OP_STRUCTS,
    MAX_FINDINGS_PER_OBJECT,
    RULES,
    cxx_path,
    demangle,
    parse_elf,
    screen_objects,
)
from evalsvc.core.results import Finding

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("EVALSVC_SYMBOL_SCREEN_CACHE", "/var/tmp/evalsvc-test/symbol-screen"))
NVCC = "/usr/local/cuda/bin/nvcc"
GXX = shutil.which("g++") or "g++"
ARCH = ["-gencode", "arch=compute_90a,code=sm_90a"]
# torch 2.14's headers `#error` below C++20, and torch's own ninja writer passes -std=c++20.
CXX_STD = "-std=c++20"

# A cold cache compiles four torch-header translation units (minutes on a small, shared machine); the
# first test that needs them pays for all of them.
pytestmark = pytest.mark.timeout(1800)

needs_toolchain = pytest.mark.skipif(
    shutil.which(GXX) is None or not Path(NVCC).exists(), reason="needs g++ and nvcc"
)


# ---------------------------------------------------------------------------------------------------
# Compiling, with a cache


@functools.cache
def _compiler_version(compiler: str) -> str:
    return subprocess.run([compiler, "--version"], capture_output=True, text=True, check=True).stdout


def compile_object(source: str, suffix: str, flags: list[str], timeout_s: float = 1500) -> bytes:
    """The object g++ (.cpp) or nvcc (.cu) makes of `source` with `flags`, from the cache when it has it."""
    compiler = NVCC if suffix == ".cu" else GXX
    key = hashlib.sha256(
        "\0".join([source, suffix, *flags, _compiler_version(compiler)]).encode()
    ).hexdigest()
    cached = CACHE / f"{key[:32]}.o"
    if cached.exists():
        return cached.read_bytes()
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        src, obj = Path(tmp) / f"candidate{suffix}", Path(tmp) / "candidate.o"
        src.write_text(source)
        done = subprocess.run([compiler, *flags, "-c", str(src), "-o", str(obj)], capture_output=True,
                              text=True, timeout=timeout_s, check=False)  # fmt: skip
        assert done.returncode == 0, f"{compiler} failed:\n{done.stderr[-4000:]}"
        os.replace(obj, cached)  # atomic: a concurrent run sees the whole file or none
    return cached.read_bytes()


@functools.cache
def torch_cxx_flags() -> tuple[str, ...]:
    """The include paths and defines torch's extension build uses for the candidate's C++."""
    from torch.utils import cpp_extension

    includes = [*cpp_extension.include_paths("cpu"), sysconfig.get_paths()["include"]]
    return ("-DTORCH_API_INCLUDE_EXTENSION_H", *(f for i in includes for f in ("-isystem", i)))


@functools.cache
def torch_cuda_flags() -> tuple[str, ...]:
    """Plus CUDA's headers, the vendor headers of NVIDIA's wheels (ATen/cuda includes cuBLAS's) and the
    defines torch passes to nvcc."""
    from torch.utils import cpp_extension

    from evalsvc.compiler.ninja_build import vendor_include_flags

    cuda_include = str(Path(NVCC).resolve().parent.parent / "include")
    vendor = [part for flag in vendor_include_flags() for part in flag.split(" ", 1)]
    return (*torch_cxx_flags(), "-isystem", cuda_include, *vendor, *cpp_extension.COMMON_NVCC_FLAGS)


def _module_assignments(path: Path) -> dict[str, ast.AST]:
    return {
        t.id: node.value
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }


def source_constant(path: Path, name: str) -> str:
    """A module-level string constant of an example (its C++/CUDA source), read with ast."""
    value = _module_assignments(path)[name]
    assert isinstance(value, ast.Constant) and isinstance(value.value, str)
    return value.value


def load_inline_flags(path: Path, keyword: str) -> list[str]:
    """`extra_cflags` / `extra_cuda_cflags` of the example's load_inline call, read with ast."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == keyword and isinstance(kw.value, ast.List):
                    return [e.value for e in kw.value.elts if isinstance(e, ast.Constant)]
    return []


# ---------------------------------------------------------------------------------------------------
# Honest candidates: (example file, constant holding the candidate's source, suffix, load_inline keyword)

# The honest CUDA sources with torch's headers take minutes each for nvcc on the 2-core machine: their
# objects are screened through the real compile stage instead (tests/integration/test_cuda_compile.py).
HONEST = {
    "relu_parallel_for.o": ("tests/corpus/honest/relu_cpu_parallel_for.py", "SRC", ".cpp", "extra_cflags"),
    "mlp_openmp.o": ("evalsvc/examples/l3/mlp_block/cpu_ok.py", "cpp_source", ".cpp", "extra_cflags"),
}  # fmt: skip
GEMM_CU = REPO / "evalsvc/examples/l2/gemm_bias_relu/cuda_agent/kernels/gemm_bias_relu.cu"


def _honest_job(name: str) -> tuple[str, str, list[str]]:
    """(source, suffix, flags) for one honest candidate, built as torch's extension build would."""
    if name == "gemm_bias_relu.o":  # the CUDA Agent layout: a plain .cu with an extern "C" launcher
        return GEMM_CU.read_text(), ".cu", ["-Xcompiler", "-fPIC", "-O3", CXX_STD, *ARCH]
    rel, constant, suffix, keyword = HONEST[name]
    path = REPO / rel
    extra = load_inline_flags(path, keyword)  # -O3, and -fopenmp where the example uses it
    if suffix == ".cu":
        flags = ["-Xcompiler", "-fPIC", "-O3", CXX_STD, *ARCH, *torch_cuda_flags(), *extra]
    else:
        flags = ["-fPIC", "-O3", CXX_STD, *torch_cxx_flags(), *extra]
    return source_constant(path, constant), suffix, flags


@pytest.fixture(scope="module")
def honest() -> dict[str, bytes]:
    """All honest objects, compiled two at a time, longest first (the slow part of a cold run)."""
    names = ["mlp_openmp.o", "relu_parallel_for.o", "gemm_bias_relu.o"]
    with ThreadPoolExecutor(max_workers=2) as pool:
        built = pool.map(lambda n: compile_object(*_honest_job(n)), names)
        return dict(zip(names, built, strict=True))


def _wheel_includes() -> list[str]:
    """cuBLAS's headers come with NVIDIA's pip wheels here (the toolkit has nvcc and the runtime only)."""
    from evalsvc.compiler.ninja_build import vendor_include_flags

    return [f.split(" ", 1)[1] for f in vendor_include_flags()]


def _show(findings: list[Finding]) -> str:
    return "\n".join(f"{f.rule} {f.file}: {f.message}" for f in findings)


@needs_toolchain
@pytest.mark.parametrize("name", ["relu_parallel_for.o", "mlp_openmp.o", "gemm_bias_relu.o"])
def test_honest_object_passes(honest: dict[str, bytes], name: str) -> None:
    findings = screen_objects({name: honest[name]}, allow_vendor_libs=False)
    assert findings == [], _show(findings)


@needs_toolchain
def test_cublas_needs_vendor_permission() -> None:
    source = (
        "#include <cublas_v2.h>\n"
        "int gemm(cublasHandle_t h, int n, const float* a, const float* b, float* c) {\n"
        "  const float one = 1.f, zero = 0.f;\n"
        "  return cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n);\n}\n"
    )
    includes = [str(Path(NVCC).resolve().parent.parent / "include"), *_wheel_includes()]
    obj = {
        "matmul_cublas.o": compile_object(
            source, ".cpp", ["-fPIC", "-O2", *(f for i in includes for f in ("-isystem", i))]
        )
    }
    assert screen_objects(obj, allow_vendor_libs=True) == []
    refused = screen_objects(obj, allow_vendor_libs=False)
    assert refused and {f.rule for f in refused} == {"symbol-vendor"}, _show(refused)
    assert any("cublasSgemm" in f.message for f in refused)


@needs_toolchain
def test_screen_time_on_honest_objects(honest: dict[str, bytes], capsys: pytest.CaptureFixture[str]) -> None:
    """Measured, not asserted: the screen's cost on the honest objects, one call over all of them."""
    start = time.perf_counter()
    findings = screen_objects(honest, allow_vendor_libs=True)
    elapsed = time.perf_counter() - start
    assert findings == [], _show(findings)
    sizes = ", ".join(f"{n} {len(b) >> 10} KiB" for n, b in honest.items())
    with capsys.disabled():
        print(f"\nscreen_objects on {len(honest)} honest objects ({sizes}): {elapsed:.2f} s")


@needs_toolchain
def test_stack_protected_registration_passes() -> None:
    """A host compiler with the stack protector on by default (Ubuntu's GCC, as on the lent H200) makes
    nvcc's `__sti____cudaRegisterAll` call `__stack_chk_fail`: every honest CUDA kernel was refused as
    `global-constructor` there (docs/results/h200-2026-12-05-proof)."""
    source = (
        "__global__ void scale(float* x, float a, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) x[i] *= a;\n}\n"
        "void launch(float* x, float a, int n) { scale<<<(n + 255) / 256, 256>>>(x, a, n); }\n"
    )
    obj = compile_object(source, ".cu", ["-Xcompiler", "-fPIC,-fstack-protector-all", "-O3", *ARCH])
    imports = {s.name for s in parse_elf(obj).symbols if s.index and not s.defined}
    assert "__stack_chk_fail" in imports
    findings = screen_objects({"scale.o": obj}, allow_vendor_libs=False)
    assert findings == [], _show(findings)


@needs_toolchain
@pytest.mark.parametrize("opt", ["-O3", "-O0"])
def test_device_function_host_bodies_pass(opt: str) -> None:
    """nvcc gives every non-inline `__device__` function a host body, `{ int volatile ___ = 1;
    ::exit(___); }`, that nothing calls: honest kernels with a device helper were refused for `exit`
    (`symbol-escape`) on both builds. A host function that calls exit is still refused
    (symbol_screen_cases/exit-*.cpp)."""
    source = (
        "__device__ float twice(float v) { return 2.0f * v; }\n"
        "__device__ float clamp01(float v, float lo) { return v < lo ? lo : (v > 1.0f ? 1.0f : v); }\n"
        "__global__ void k(float* x, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) x[i] = clamp01(twice(x[i]), 0.0f);\n}\n"
        "void launch(float* x, int n) { k<<<(n + 255) / 256, 256>>>(x, n); }\n"
    )
    obj = compile_object(source, ".cu", ["-Xcompiler", "-fPIC", opt, *ARCH])
    imports = {s.name for s in parse_elf(obj).symbols if s.index and not s.defined}
    assert "exit" in imports
    findings = screen_objects({"device_helpers.o": obj}, allow_vendor_libs=False)
    assert findings == [], _show(findings)


@needs_toolchain
@pytest.mark.parametrize(("callee", "call"), [("exit(int)", "exit(1)"), ("abort()", "abort()")])
def test_candidates_own_noreturn_name_returns_into_what_follows(callee: str, call: str) -> None:
    """`exit` or `abort` ends a region (nothing runs on after libc's), unless the candidate's other object
    defines it: a hidden one that returns runs on from the call into the next function, here one under a
    library's namespace that reads the environment and that nothing else reaches. (Before `abort` and the
    other names that do not return were read this way, the fall-through was not followed.)"""
    caller = compile_object(
        "#include <cstdlib>\n"
        f"void entry() {{ {call}; }}\n"
        "namespace c10 { namespace detail {\n"
        "__attribute__((used, noinline)) static long after(long v) { return v + (long)getenv(\"HOME\"); }\n"
        "} }\n",
        ".cpp", ["-fPIC", "-O2", "-fno-reorder-functions"],  # else an `abort()` caller goes to .text.unlikely
    )  # fmt: skip
    own = compile_object(
        f'extern "C" __attribute__((visibility("hidden"))) void {callee} {{}}\n', ".cpp", ["-fPIC", "-O2"]
    )
    findings = screen_objects({"caller.o": caller, "own.o": own}, allow_vendor_libs=False)
    assert any("getenv" in f.message for f in findings), _show(findings)


@needs_toolchain
def test_exit_stub_called_through_an_alias_from_another_object() -> None:
    """nvcc's exit-stub shape is dropped as dead when the other objects do not use it by name; an alias at the
    same address is another name. Here the other object calls the alias, and the stub's one call goes
    through exit's GOT slot plus an offset the caller chooses (any libc function), so `exit` must stand."""
    stub = compile_object(
        'asm(R"(\n  .intel_syntax noprefix\n  .section .text.stub_like,\"ax\",@progbits\n'
        "  .globl stub_like\n  .type stub_like, @function\nstub_like:\n"
        "  mov rax, qword ptr [rip + exit@GOTPCREL]\n  add rax, rdi\n  mov rdi, rsi\n  call rax\n"
        "  .size stub_like, .-stub_like\n  .globl keep_alive\n  .set keep_alive, stub_like\n"
        '  .section .text.stub_like_ret,\"ax\",@progbits\n  ret\n  .att_syntax prefix\n  .text\n)");\n',
        ".cpp", ["-fPIC", "-O2"],
    )  # fmt: skip
    caller = compile_object(
        'extern "C" const char* keep_alive(long, const char*);\n'
        'const char* entry(long k) { return keep_alive(k, "HOME"); }\n',
        ".cpp", ["-fPIC", "-O2"],
    )  # fmt: skip
    findings = screen_objects({"stub.o": stub, "caller.o": caller}, allow_vendor_libs=False)
    assert any(f.rule == "symbol-escape" and "`exit`" in f.message for f in findings), _show(findings)


@needs_toolchain
def test_cuda_guard_passes() -> None:
    """`c10::cuda::CUDAGuard`, which honest CUDA solutions use (honest/relu_cuda_dispatch_template.py),
    stores CUDAGuardImpl's vtable: its inline methods, compiled from the real c10 headers into the object,
    import events, side streams and the caching allocator, which no guard calls."""
    from torch.utils import cpp_extension

    source = (
        "#include <c10/cuda/CUDAGuard.h>\n#include <c10/cuda/CUDAStream.h>\n"
        "int run_on(const c10::Device& device) {\n  const c10::cuda::CUDAGuard guard(device);\n"
        "  return c10::cuda::getCurrentCUDAStream().stream() != nullptr;\n}\n"
    )
    includes = [*cpp_extension.include_paths("cpu"), str(Path(NVCC).resolve().parent.parent / "include")]
    flags = ["-fPIC", "-O3", CXX_STD, *(f for i in includes for f in ("-isystem", i))]
    obj = compile_object(source, ".cpp", flags)
    imports = {s.name for s in parse_elf(obj).symbols if s.index and not s.defined}
    assert {"cudaEventRecord", "_ZN3c104cuda20setCurrentCUDAStreamENS0_10CUDAStreamE"} <= imports
    findings = screen_objects({"guard.o": obj}, allow_vendor_libs=False)
    assert findings == [], _show(findings)


@needs_toolchain
def test_objects_reference_each_other(honest: dict[str, bytes]) -> None:
    """A .cpp calling the .cu's extern "C" launcher links to it; alone, the launcher is unknown."""
    caller = compile_object(
        'extern "C" int gemm_bias_relu_splits(int, int, int);\n'
        "int splits_for(int m, int n, int k) { return gemm_bias_relu_splits(m, n, k); }\n",
        ".cpp", ["-fPIC", "-O2"],
    )  # fmt: skip
    pair = {"gemm_bias_relu.o": honest["gemm_bias_relu.o"], "binding_side.o": caller}
    assert screen_objects(pair, allow_vendor_libs=False) == []
    alone = screen_objects({"binding_side.o": caller}, allow_vendor_libs=False)
    assert [f.rule for f in alone] == ["symbol-unknown"] and "gemm_bias_relu_splits" in alone[0].message


@needs_toolchain
def test_reader_agrees_with_nm(honest: dict[str, bytes], tmp_path: Path) -> None:
    """The screen's own ELF reader sees the undefined symbols binutils sees, and the qualified names it reads
    from the mangling are what c++filt prints."""
    for name, data in honest.items():
        path = tmp_path / name
        path.write_bytes(data)
        nm = subprocess.run(["nm", "-u", str(path)], capture_output=True, text=True, check=True).stdout
        expected = {line.split()[-1] for line in nm.splitlines() if line.strip()}
        elf = parse_elf(data)
        assert {s.name for s in elf.symbols if s.index and not s.defined} == expected, name
    mangled = sorted(
        {s.name for d in honest.values() for s in parse_elf(d).symbols if s.name.startswith("_Z")}
    )
    readable = demangle(mangled)
    assert readable is not None
    for symbol in mangled:
        path = cxx_path(symbol)
        if path is not None and not path[-1].startswith(("<", "operator:", "_GLOBAL__N")):
            assert path[-1] in readable[symbol], (symbol, path, readable[symbol])


# ---------------------------------------------------------------------------------------------------
# Hostile candidates: tiny translation units (no torch headers) that declare what they misuse, one per file
# in symbol_screen_cases/, each saying `// expect: <rule> | <part of the finding>` (or `none`).

CASES = Path(__file__).resolve().parent / "symbol_screen_cases"
CASE_FLAGS = ["-fPIC", "-O2", "-mrdrnd"]
_EXPECT = re.compile(r"^// expect: (\S+)(?: \| (.+))?$", re.MULTILINE)


def _cases() -> list[tuple[str, str, str]]:
    out = []
    for path in sorted(CASES.glob("*.cpp")):
        expect = _EXPECT.search(path.read_text())
        assert expect is not None, f"{path.name} says nothing about what to expect"
        out.append((path.name, expect.group(1), expect.group(2) or ""))
    return out


@needs_toolchain
@pytest.mark.parametrize(("case", "rule", "needle"), _cases(), ids=lambda v: str(v).removesuffix(".cpp"))
def test_case(case: str, rule: str, needle: str) -> None:
    obj = compile_object((CASES / case).read_text(), ".cpp", CASE_FLAGS)
    findings = screen_objects({case: obj}, allow_vendor_libs=True)
    if rule == "none":
        assert findings == [], _show(findings)
        return
    assert any(f.rule == rule and needle in f.message for f in findings), _show(findings)
    assert all(f.file == case and f.line == 0 and f.rule in RULES for f in findings)


@needs_toolchain
def test_vendor_library_refused_unless_allowed() -> None:
    obj = compile_object(
        'extern "C" int cublasSscal_v2(void*, int, const float*, float*, int);\n'
        "int scale(void* h, float* x, int n) { const float a = 2; return cublasSscal_v2(h, n, &a, x, 1); }\n",
        ".cpp", ["-fPIC", "-O2"],
    )  # fmt: skip
    assert screen_objects({"v.o": obj}, allow_vendor_libs=True) == []
    refused = screen_objects({"v.o": obj}, allow_vendor_libs=False)
    assert [f.rule for f in refused] == ["symbol-vendor"] and "cuBLAS" in refused[0].message


# ---------------------------------------------------------------------------------------------------
# Bytes that are not a readable object: refused, never passed, never a crash


@pytest.fixture(scope="module")
def small_object() -> bytes:
    return compile_object("int twice(int x) { return 2 * x; }\n", ".cpp", ["-fPIC", "-O2"])


def _unreadable(objects: Mapping[str, bytes]) -> list[Finding]:
    findings = screen_objects(objects, allow_vendor_libs=False)
    assert findings and all(f.rule == "object-unreadable" for f in findings), _show(findings)
    return findings


def _patched(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


@needs_toolchain
def test_not_an_object_is_refused(small_object: bytes) -> None:
    _unreadable({"garbage.o": b"\x00not an ELF object at all\xff" * 64})
    _unreadable({"empty.o": b""})
    _unreadable({"truncated_header.o": small_object[:63]})
    _unreadable({"truncated.o": small_object[: len(small_object) // 2]})
    _unreadable({"shared_library.o": _patched(small_object, 16, "<H", 3)})  # ET_DYN
    _unreadable({"aarch64.o": _patched(small_object, 18, "<H", 183)})  # EM_AARCH64
    _unreadable({"huge.o": b"\x7fELF" + bytes(64 << 20)})


@needs_toolchain
def test_symbol_name_over_limit_is_refused() -> None:
    long_name = "x" * 9000
    obj = compile_object(
        f'extern "C" void g() __asm__("{long_name}");\nvoid f() {{ g(); }}\n', ".cpp", ["-fPIC"]
    )
    assert any("8 KiB" in f.message for f in _unreadable({"long.o": obj}))


@needs_toolchain
def test_mutated_objects_never_crash(small_object: bytes, honest: dict[str, bytes]) -> None:
    """Random corruption of real objects: always a list of findings, never an exception, in bounded time."""
    rng = random.Random(20260)
    bases = [small_object, honest["gemm_bias_relu.o"]]
    start = time.perf_counter()
    for round_ in range(300):
        data = bytearray(bases[round_ % 2])
        for _ in range(rng.choice((1, 4, 32))):
            pos = rng.randrange(len(data)) if rng.random() < 0.7 else rng.randrange(min(len(data), 4096))
            data[pos] = rng.randrange(256)
        findings = screen_objects({"mutant.o": bytes(data)}, allow_vendor_libs=False)
        assert isinstance(findings, list) and all(isinstance(f, Finding) for f in findings)
        assert len(findings) <= MAX_FINDINGS_PER_OBJECT
    assert time.perf_counter() - start < 120


@needs_toolchain
def test_findings_are_bounded_and_one_per_symbol() -> None:
    calls = "".join(f'extern "C" int api_{i}(void);\n' for i in range(120))
    body = " + ".join(f"api_{i}()" for i in range(120))
    obj = compile_object(f"{calls}int f() {{ return {body} + api_0(); }}\n", ".cpp", ["-fPIC", "-O2"])
    findings = screen_objects({"many.o": obj}, allow_vendor_libs=False)
    assert len(findings) == MAX_FINDINGS_PER_OBJECT
    assert len({f.message for f in findings}) == len(findings)


@needs_toolchain
def test_cpp_names_fail_closed_without_cxxfilt(small_object: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """Template arguments are screened on the demangled text: with no c++filt to read them, C++ objects
    are refused rather than passed; an object with no C++ imports does not need it."""
    obj = compile_object("#include <string>\nstd::string twice(const std::string& s) { return s + s; }\n",
                         ".cpp", ["-fPIC", "-O2"])  # fmt: skip
    assert screen_objects({"cxx.o": obj}, allow_vendor_libs=False) == []
    monkeypatch.setenv("PATH", "/nonexistent")
    findings = screen_objects({"cxx.o": obj}, allow_vendor_libs=False)
    assert [f.rule for f in findings] == ["symbol-unknown"] and "demangled" in findings[0].message
    assert screen_objects({"plain.o": small_object}, allow_vendor_libs=False) == []


# ---------------------------------------------------------------------------------------------------
# Data the screen carries


def test_allowed_op_structs_match_the_installed_torch() -> None:
    """ALLOWED_OP_STRUCTS is derived from torch's registry: every overload of the runtime check's allowed
    operators that the dispatcher knows, named as torchgen names `at::_ops` structs."""
    import torch

    from evalsvc.sandboxed.runtime_checks import ALLOWED_OPS

    derived = set()
    for schema in torch._C._jit_get_all_schemas():
        packet = schema.name.removeprefix("aten::")
        if schema.name.startswith("aten::") and packet in ALLOWED_OPS:
            try:  # TorchScript-only builtins (aten::split.str) have no at::_ops struct
                torch._C._dispatch_find_schema_or_throw(schema.name, schema.overload_name)
            except RuntimeError:
                continue
            derived.add(f"{packet}_{schema.overload_name}" if schema.overload_name else packet)
    assert derived == set(ALLOWED_OP_STRUCTS), (
        f"regenerate ALLOWED_OP_STRUCTS: missing {sorted(derived - ALLOWED_OP_STRUCTS)}, "
        f"stale {sorted(ALLOWED_OP_STRUCTS - derived)}"
    )
    lib = Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"
    nm = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True)
    structs = {m.group(2)[: int(m.group(1))] for m in re.finditer(r"_ZN2at4_ops(\d+)(\w+)", nm.stdout)}
    assert set(ALLOWED_OP_STRUCTS) <= structs


def test_screen_does_not_import_torch() -> None:
    code = "import sys, evalsvc.compiler.symbol_screen; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO, check=False).returncode == 0
