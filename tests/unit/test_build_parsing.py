from evalsvc.compiler.diagnostics import parse_diagnostics, parse_ptxas
from evalsvc.compiler.inline import generated_sources, normalize_call

PTXAS = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z4reluPKfPfi' for 'sm_90a'
ptxas info    : Function properties for _Z4reluPKfPfi
    0 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers, 1024 bytes smem, 372 bytes cmem[0]
"""


def test_ptxas_report() -> None:
    (k,) = parse_ptxas(PTXAS)
    assert k.kernel.startswith("relu(") and k.arch == "sm_90a"
    assert (k.registers, k.shared_bytes, k.spill_stores_bytes, k.spill_loads_bytes) == (12, 1024, 8, 4)


def test_gcc_and_nvcc_errors_have_file_and_line() -> None:
    log = (
        "/tmp/x/main.cpp:7:3: error: 'foo' was not declared in this scope\n"
        '/tmp/x/cuda.cu(12): error: identifier "bar" is undefined\n'
    )
    d = parse_diagnostics(log)
    assert [(x.file, x.line) for x in d] == [("main.cpp", 7), ("cuda.cu", 12)]


def test_inline_call_key_is_stable_and_sources_match_load_inline() -> None:
    a = normalize_call(("ext",), {"cpp_sources": "int f();", "functions": ["f"]})
    b = normalize_call((), {"name": "ext", "cpp_sources": ["int f();"], "functions": {"f": "f"}})
    assert a.key == b.key
    src = generated_sources(a)["main.cpp"]
    assert (
        src.startswith("#include <torch/extension.h>")
        and 'm.def("f", torch::wrap_pybind_function(f), "f");' in src
    )
