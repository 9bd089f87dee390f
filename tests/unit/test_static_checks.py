"""Static reward-hacking checks: exploits are caught, honest solutions pass, hostile text never raises.

No compiler, no torch: `check_python` on the solution's Python, `check_native` on its C++/CUDA (the strings
a KernelBench file hands to load_inline, or a CUDA Agent tree's kernels/). `pytest -s` prints the table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsvc.core.static_checks import RULES, Finding, check_native, check_python, inline_sources
from tests.corpus.reader import header

ROOT = Path(__file__).parents[2]
CORPUS = ROOT / "tests" / "corpus"
EXAMPLES = ROOT / "evalsvc" / "examples"
EXPECTS = {"forbidden", "incorrect", "runtime_error"}


def solution(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(Python files, C++/CUDA sources) of a single-file solution or a CUDA Agent tree."""
    if path.is_dir():
        files = {str(p.relative_to(path)): p.read_text() for p in sorted(path.rglob("*")) if p.is_file()}
        py = {k: v for k, v in files.items() if k.endswith(".py")}
        return py, {k: v for k, v in files.items() if k not in py}
    text = path.read_text()
    return {"solution.py": text}, inline_sources(text)


def findings(path: Path) -> list[Finding]:
    py, native = solution(path)
    allow = header(path).get("allow_vendor_libs") == "true"
    return check_python(py) + check_native(native, allow)


def _entries(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix == ".py" or (p / "model_new.py").is_file())


EXPLOITS = _entries(CORPUS / "exploits")
STATIC = [p for p in EXPLOITS if header(p).get("caught by", "").startswith("static:")]
HONEST = _entries(CORPUS / "honest")
EXAMPLE_SOLUTIONS = [
    *sorted(p for p in EXAMPLES.glob("*/*/*.py") if p.name != "task.py"),
    EXAMPLES / "l2" / "gemm_bias_relu" / "cuda_agent",
]


def _id(p: Path) -> str:
    return str(p.relative_to(ROOT))


# -- the corpus ------------------------------------------------------------------------------------------


def test_corpus_sizes() -> None:
    assert len(EXPLOITS) >= 25 and len(STATIC) >= 20
    assert len(HONEST) >= 15


@pytest.mark.parametrize("path", EXPLOITS, ids=_id)
def test_exploit_header(path: Path) -> None:
    h = header(path)
    assert h.get("trick") and h.get("expect") in EXPECTS, h
    assert h.get("device") in ("any", "cpu", "cuda"), h
    kind, _, name = h.get("caught by", "").partition(":")
    assert kind in ("static", "runtime") and name, h
    if kind == "static":
        assert name in RULES, f"unknown rule {name}"
    task = h.get("task", "")
    task_dir = ROOT / task if task.startswith("tests/") else EXAMPLES / task
    assert (task_dir / "task.py").is_file(), task


@pytest.mark.parametrize("path", STATIC, ids=_id)
def test_exploit_is_caught(path: Path) -> None:
    want = header(path)["caught by"].removeprefix("static:")
    got = findings(path)
    assert want in {f.rule for f in got}, got


@pytest.mark.parametrize("path", HONEST + EXAMPLE_SOLUTIONS, ids=_id)
def test_honest_solution_has_no_findings(path: Path) -> None:
    assert findings(path) == []


@pytest.mark.parametrize("path", HONEST, ids=_id)
def test_honest_header(path: Path) -> None:
    h = header(path)
    assert h.get("style") and h.get("device") in ("cpu", "cuda"), h
    assert (EXAMPLES / h.get("task", "?") / "task.py").is_file(), h


def test_print_table() -> None:
    """The exploit table (file, expected, rules found); shown with `pytest -s`."""
    rows = []
    for p in EXPLOITS:
        h = header(p)
        rows.append((p.name, h["caught by"], ",".join(sorted({f.rule for f in findings(p)})) or "-"))
    width = max(len(r[0]) for r in rows)
    print(f"\n{'file':<{width}}  {'expected':<34}  static findings")
    for name, want, got in rows:
        print(f"{name:<{width}}  {want:<34}  {got}")


# -- Python: aliases and the forward allowlist --------------------------------------------------------------

_EXT = """
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
ext = load_inline(name="e", cpp_sources="", functions=["f"])
"""


def _model(forward: str, head: str = "", init: str = "") -> dict[str, str]:
    body = "\n".join("        " + line for line in forward.strip().splitlines())
    init_body = "\n".join("        " + line for line in init.strip().splitlines()) or "        pass"
    src = f"""{_EXT}{head}

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
{init_body}

    def forward(self, x, y):
{body}
"""
    return {"solution.py": src}


def _rules(files: dict[str, str]) -> set[str]:
    return {f.rule for f in check_python(files)}


COMPUTE = [
    ("", "return torch.relu(x)"),
    ("import torch as T", "return T.relu(x)"),
    ("from torch import nn as N", "return N.functional.relu(x)"),
    ("import torch.nn.functional as F", "return F.relu(x)"),
    ("from torch.nn.functional import relu as r", "return r(x)"),
    ("from torch.nn import functional as Fn", "return Fn.softmax(x, -1)"),
    ("F = torch.nn.functional", "return F.relu(x)"),
    ("F = torch.nn.functional\nact = F.gelu", "return act(x)"),
    ("", 'return getattr(torch, "relu")(x)'),
    ("", "return torch.ops.aten.relu(x)"),
    ("", "return torch.special.expit(x)"),
    ("", "return torch.linalg.norm(x)"),
    ("", "return torch.fft.fft(x)"),
    ("", "return torch.tensor([1.0]) * 0"),
    ("", "return x @ y"),
    ("", "return x + y"),
    ("", "return x * 2"),
    ("", "return -x"),
    ("", "return ext.f(x) * 2"),
    ("", "out = ext.f(x)\nout += y\nreturn out"),
    ("", "return (x > 0).float()"),
    ("", "return x.sum()"),
    ("", "return x.exp()"),
    ("", "return x.relu()"),
    ("", "return x.matmul(y)"),
    ("", "return x.contiguous().clamp_min(0)"),
    ("", "return sum(x)"),
    ("", "return self.helper(x)"),
    ("", "f = lambda t: t.relu()\nreturn f(x)"),
    ("", "def inner(t):\n    return t * 2\nreturn inner(x)"),
    ("def helper(t):\n    return torch.sigmoid(t)", "return helper(x)"),
    ("", "return nn.ReLU()(x)"),
    ("", "return list(map(torch.relu, [x]))[0]"),
]


@pytest.mark.parametrize(("head", "forward"), COMPUTE)
def test_compute_in_forward_is_found(head: str, forward: str) -> None:
    files = _model(forward, head)
    files["solution.py"] += "\n    def helper(self, t):\n        return torch.tanh(t)\n"
    assert "torch-compute-in-forward" in _rules(files), forward


def test_submodule_calls_compute_but_parameters_do_not() -> None:
    init = "self.linear = nn.Linear(4, 4)\nself.layers = nn.ModuleList([nn.Linear(4, 4)])\n"
    init += "self.act = torch.nn.functional.gelu"
    assert "torch-compute-in-forward" in _rules(_model("return self.linear(x)", init=init))
    assert "torch-compute-in-forward" in _rules(_model("return self.layers[0](x)", init=init))
    assert "torch-compute-in-forward" in _rules(
        _model("for layer in self.layers:\n    x = layer(x)\nreturn x", init=init)
    )
    assert "torch-compute-in-forward" in _rules(_model("return self.act(x)", init=init))
    assert "torch-compute-in-forward" in _rules(_model("return self.linear.weight * 2", init=init))
    params = "return ext.f(x, self.linear.weight.contiguous(), self.linear.bias.t(), self.linear.in_features)"
    assert _rules(_model(params, init=init)) == set()


ALLOWED = [
    "return ext.f(x.contiguous(), y.view(-1))",
    "n = x.numel()\nblocks = (n + 255) // 256\nreturn ext.f(x, blocks * 2, n % 4)",
    "out = torch.empty_like(x)\next.f(x, out)\nreturn out.view(x.shape)",
    "out = x.new_zeros(x.shape[0] * 2, x.size(1) + 1)\nreturn ext.f(out)",
    "h = x.reshape(-1, x.shape[-1]).permute(1, 0).contiguous()\nreturn ext.f(h).t()",
    "assert x.dim() == 2 and x.dtype == torch.float32 and x.is_contiguous()\nreturn ext.f(x)",
    "if x.data_ptr() % 16 != 0:\n    x = x.clone()\nreturn ext.f(x.to(torch.float32).float())",
    "rows = math.ceil(x.shape[0] / 8)\nreturn ext.f(x[:rows], y[0], len(x.shape), isinstance(x, nn.Module))",
    "parts = x.chunk(2)\nreturn ext.f(parts[0].squeeze(0).unsqueeze(1).expand(-1, 4), int(x.size(0)))",
    "a, b = ext.f(x), ext.f(y)\nreturn torch.zeros(a.size(0), device=x.device, dtype=b.dtype)",
    "with torch.no_grad():\n    return ext.f(x.detach(), torch.full((2,), 1.0), torch.ones_like(y))",
]


@pytest.mark.parametrize("forward", ALLOWED)
def test_allowlist_in_forward(forward: str) -> None:
    assert _rules(_model(forward, "import math")) == set(), forward


def test_load_of_own_sources_is_allowed() -> None:
    head = "from torch.utils.cpp_extension import load\nm = load('m', sources=['kernels/a.cu', 'b.cpp'])"
    assert _rules(_model("return m.f(x)", head)) == set()


def test_cuda_agent_module_and_annotations() -> None:
    src = "import cuda_extension\nimport torch\nfrom torch import nn\n\n\nclass ModelNew(nn.Module):\n"
    src += "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        return cuda_extension.relu(x)\n"
    assert check_python({"model_new.py": src}) == []


def test_local_modules_are_followed() -> None:
    helper = "import torch\n\n\ndef act(t):\n    return torch.relu(t)\n"
    model = "import torch.nn as nn\nfrom helpers import act\n\n\nclass ModelNew(nn.Module):\n"
    model += "    def forward(self, x):\n        return act(x)\n"
    found = check_python({"model_new.py": model, "helpers.py": helper})
    assert [(f.rule, f.file) for f in found] == [("torch-compute-in-forward", "helpers.py")]


# -- Python: the other rules ---------------------------------------------------------------------------------

RULE_CASES = [
    ("torch-compile", "", "return torch.compile(ext.f)(x)"),
    ("torch-compile", "f = torch.jit.script(lambda t: t)", "return ext.f(x)"),
    ("torch-compile", "import torch._dynamo", "return ext.f(x)"),
    ("reference-model", "from reference import Model", "return ext.f(x)"),
    ("reference-model", "import model", "return ext.f(x)"),
    ("reference-model", "", "return Model()(x)"),
    ("fallback-handler", "", "try:\n    return ext.f(x)\nexcept Exception:\n    return x"),
    ("fallback-handler", "try:\n    import foo\nexcept:\n    pass", "return ext.f(x)"),
    ("fallback-handler", "import contextlib", "with contextlib.suppress(RuntimeError):\n    return ext.f(x)"),
    ("concurrency", "import threading", "return ext.f(x)"),
    ("concurrency", "from concurrent.futures import ThreadPoolExecutor", "return ext.f(x)"),
    ("concurrency", "import subprocess", "return ext.f(x)"),
    ("concurrency", "", "s = torch.cuda.current_stream()\nreturn ext.f(x)"),
    ("concurrency", "import torch.multiprocessing as mp", "return ext.f(x)"),
    ("concurrency", "import os", "os.fork()\nreturn ext.f(x)"),
    ("forbidden-import", "import time", "return ext.f(x)"),
    ("forbidden-import", "import numpy as np", "return ext.f(x)"),
    ("forbidden-import", "import pickle", "return ext.f(x)"),
    ("forbidden-import", "from pathlib import Path", "return ext.f(x)"),
    ("forbidden-import", "import ctypes", "return ext.f(x)"),
    ("forbidden-import", "import inspect", "return ext.f(x)"),
    ("forbidden-attribute", "", "torch.cuda.synchronize()\nreturn ext.f(x)"),
    ("forbidden-attribute", "", "e = torch.cuda.Event(enable_timing=True)\nreturn ext.f(x)"),
    ("forbidden-attribute", "", "torch.cuda.empty_cache()\nreturn ext.f(x)"),
    ("forbidden-attribute", "torch.backends.cuda.matmul.allow_tf32 = True", "return ext.f(x)"),
    ("forbidden-attribute", "from torch.cuda import synchronize", "return ext.f(x)"),
    ("forbidden-attribute", "g = torch.Generator()", "return ext.f(x)"),
    ("forbidden-attribute", "from torch.testing import assert_close", "return ext.f(x)"),
    ("forbidden-attribute", "nn.functional.relu = ext.f", "return ext.f(x)"),
    ("forbidden-attribute", 'setattr(torch, "allclose", lambda *a: True)', "return ext.f(x)"),
    ("forbidden-attribute", "", 'return ext.f(open("task.py").read())'),
    ("forbidden-attribute", "", "exit(0)"),
    ("forbidden-attribute", "", "f = (lambda: 0).__code__\nreturn ext.f(x)"),
    ("forbidden-attribute", "", "return torch.load('answer.pt')"),
    ("forbidden-attribute", "torch.ops.load_library('/tmp/x.so')", "return ext.f(x)"),
    ("forbidden-attribute", "", "torch.set_num_threads(1)\nreturn ext.f(x)"),
    ("forbidden-attribute", "from torch.utils.cpp_extension import include_paths", "return ext.f(x)"),
    (
        "forbidden-attribute",
        "from torch.utils.cpp_extension import load\nm = load('m', ['/x/a.cpp'])",
        "return m.f(x)",
    ),
    ("dynamic-lookup", "name = 'relu'", "return getattr(torch, name)(x)"),
    ("dynamic-lookup", "", "return eval('torch.relu')(x)"),
    ("dynamic-lookup", "", "return __import__('torch').relu(x)"),
    ("dynamic-lookup", "", "return vars(torch)['relu'](x)"),
    ("dynamic-lookup", "", "return torch.__dict__['relu'](x)"),
    ("dynamic-lookup", "", "return globals()['ext'].f(x)"),
    ("dynamic-lookup", "import importlib", "return importlib.import_module('torch').relu(x)"),
    (
        "caching",
        "import functools",
        "return self.run(x)\n@functools.lru_cache\ndef run(self, t):\n    return ext.f(t)",
    ),
    ("caching", "_LAST = [None]", "_LAST[0] = ext.f(x)\nreturn _LAST[0]"),
    ("caching", "_SEEN = []", "_SEEN.append(x)\nreturn ext.f(x)"),
    ("caching", "COUNT = 0", "global COUNT\nCOUNT += 1\nreturn ext.f(x)"),
    ("caching", "", "self.calls = getattr(self, 'calls', 0) + 1\nreturn ext.f(x)"),
    ("caching", "", "self.cache = {}\nk = id(x)\nreturn ext.f(x)"),
    ("caching", "", "setattr(self, 'last', x)\nreturn ext.f(x)"),
    ("tensor-subclass", "class Lazy(torch.Tensor):\n    pass", "return ext.f(x)"),
    ("tensor-subclass", "", "return ext.f(x).as_subclass(torch.Tensor)"),
]


@pytest.mark.parametrize(("rule", "head", "forward"), RULE_CASES)
def test_rule(rule: str, head: str, forward: str) -> None:
    assert rule in _rules(_model(forward, head)), (rule, forward)


def test_model_new_must_derive_from_nn_module() -> None:
    src = _EXT + "\n\nclass Base(nn.Module):\n    pass\n\n\nclass ModelNew(Base):\n    pass\n"
    assert "reference-model" in _rules({"solution.py": src})
    ok = _EXT + "\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return ext.f(x)\n"
    assert _rules({"solution.py": ok}) == set()


def test_model_new_bound_to_another_class_is_followed() -> None:
    impl = "class _Impl(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
    src = _EXT + "\n\n" + impl + "\n\nModelNew = _Impl\n"
    assert "torch-compute-in-forward" in _rules({"solution.py": src})
    src = _EXT + "\n\nclass _Impl(Base):\n    pass\n\n\nModelNew = _Impl\n"
    assert "reference-model" in _rules({"solution.py": src})


def test_reraising_handler_and_init_state_are_fine() -> None:
    init = "self.calls = 0\nself.w = nn.Parameter(torch.empty(4))"
    forward = (
        "try:\n    return ext.f(x, self.w)\nexcept RuntimeError as e:\n    raise ValueError('bad') from e"
    )
    assert _rules(_model(forward, init=init)) == set()


def test_findings_name_file_line_and_reason() -> None:
    (f,) = check_python(_model("return torch.matmul(x, y)"))
    assert (f.rule, f.file, f.line) == ("torch-compute-in-forward", "solution.py", 14)
    assert f.why.startswith("line 14: `torch.matmul` computes in PyTorch inside ModelNew.forward")


# -- C++/CUDA ---------------------------------------------------------------------------------------------


def _native(src: str, allow: bool = False) -> set[str]:
    return {f.rule for f in check_native({"k.cu": src}, allow)}


_HOST = "torch::Tensor f(torch::Tensor x, torch::Tensor w) {{\n    {}\n}}\n"

NATIVE = [
    ("aten-compute", _HOST.format("return at::matmul(x, w);")),
    ("aten-compute", _HOST.format("return torch::nn::functional::relu(x);")),
    ("aten-compute", "namespace F = torch::nn::functional;\n" + _HOST.format("return F::relu(x);")),
    ("aten-compute", "using at::matmul;\n" + _HOST.format("return x;")),
    ("aten-compute", _HOST.format("return matmul(x, w);")),
    ("aten-compute", _HOST.format("return x.mm(w);")),
    ("aten-compute", _HOST.format("return x.sum(0);")),
    ("aten-compute", _HOST.format("return x.contiguous().sum(0);")),
    ("aten-compute", _HOST.format("return torch::empty_like(x).add(w);")),
    ("aten-compute", _HOST.format("auto y = x + w; return y;")),
    ("aten-compute", _HOST.format("return x * 2;")),
    ("aten-compute", _HOST.format("auto y = torch::empty_like(x); y += w; return y;")),
    ("aten-compute", _HOST.format("return -x;")),
    ("aten-compute", _HOST.format("return at::native::add(x, w);")),
    ("vendor-library", "#include <cublas_v2.h>\n"),
    ("vendor-library", "#include <cudnn.h>\n"),
    (
        "vendor-library",
        _HOST.format("cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1); return x;"),
    ),
    ("vendor-library", _HOST.format("auto h = at::cuda::getCurrentCUDABlasHandle(); return x;")),
    ("native-escape", _HOST.format('system("id"); return x;')),
    ("native-escape", _HOST.format('::system("id"); return x;')),
    ("native-escape", _HOST.format('FILE* f = popen("id", "r"); return x;')),
    ("native-escape", _HOST.format('const char* s = getenv("HOME"); return x;')),
    ("native-escape", _HOST.format('std::ifstream in("task.py"); return x;')),
    ("native-escape", _HOST.format("std::thread t([] {}); t.detach(); return x;")),
    ("native-escape", _HOST.format("auto t0 = std::chrono::steady_clock::now(); return x;")),
    ("native-escape", _HOST.format("cudaStream_t s; cudaStreamCreate(&s); return x;")),
    ("native-escape", _HOST.format("auto s = at::cuda::getStreamFromPool(); return x;")),
    ("native-escape", _HOST.format('PyRun_SimpleString("import os"); return x;')),
    ("native-escape", _HOST.format('py::module::import("torch"); return x;')),
    ("native-escape", "__attribute__((constructor)) static void init() {}\n"),
    ("native-escape", "#define CAT(a, b) a##b\n"),
    ("native-cache", _HOST.format("static torch::Tensor last; return last;")),
    ("native-cache", _HOST.format("static float* buf = nullptr; return x;")),
    ("native-cache", "torch::Tensor g_last;\n" + _HOST.format("return g_last;")),
    ("native-cache", "namespace { std::unordered_map<long, torch::Tensor> memo; }\n"),
]


@pytest.mark.parametrize(("rule", "src"), NATIVE)
def test_native_rule(rule: str, src: str) -> None:
    assert rule in _native(src), src


NATIVE_OK = [
    _HOST.format(
        "auto y = torch::empty({x.size(0), w.size(1)}, x.options().dtype(torch::kFloat32)); return y;"
    ),
    _HOST.format("c10::cuda::CUDAGuard g(x.device()); auto s = at::cuda::getCurrentCUDAStream(); return x;"),
    _HOST.format("static int sms = -1; if (sms < 0) sms = 132; return x;"),
    _HOST.format('TORCH_CHECK(x.numel() * 2 > 0 && x.size(0) + 1 > 1, "at::matmul(x) system()"); return x;'),
    _HOST.format('// at::matmul(x, w); system("id")\n    /* x.mm(w) */ return x.contiguous().view({-1});'),
    _HOST.format('auto r = R"(at::matmul(x) getenv("X"))"; return x.to(torch::kHalf).t().reshape({2, -1});'),
    "__global__ void k(float* x, float* w, int n) { int i = threadIdx.x; x[i] = -x[i] * 2.0f + w[i]; }\n"
    + _HOST.format("k<<<1, 32>>>(x.data_ptr<float>(), w.data_ptr<float>(), 32); return x;"),
    "__device__ float relu(float v) { return v > 0 ? v : 0; }\n"
    "__global__ void k(float* p) { *p = relu(*p); }\n",
    "static constexpr int TILE = 32;\nstatic int sms() { return 1; }\n"
    "static torch::Tensor g(torch::Tensor x);\n",
    _HOST.format('asm volatile("membar.gl;"); std::vector<int64_t> s = x.sizes().vec(); return x;'),
    _HOST.format(
        "at::parallel_for(0, 8, 1, [&](int64_t b, int64_t e) { float v = b * 2.0f; (void)v; }); return x;"
    ),
    'extern "C" {\nint helper(int a) { return a * 2; }\n}\n',
]


@pytest.mark.parametrize("src", NATIVE_OK)
def test_native_allowlist(src: str) -> None:
    assert _native(src) == set(), src


def test_generated_load_inline_sources_pass() -> None:
    """What load_inline adds (the include, the PYBIND11_MODULE with wrap_pybind_function) is clean."""
    main = "#include <torch/extension.h>\n" + _HOST.format("return x;")
    main += (
        'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\nm.def("f", torch::wrap_pybind_function(f), "f");\n}\n'
    )
    assert check_native({"main.cpp": main}, False) == []


def test_unknown_call_results_are_not_tensors() -> None:
    assert _native("int f() { auto r = registry().add(1); return std::vector<int>{1}.size(); }") == set()


def test_vendor_libraries_when_the_task_allows_them() -> None:
    src = "#include <cublas_v2.h>\n" + _HOST.format(
        "cublasSgemm(at::cuda::getCurrentCUDABlasHandle()); return x;"
    )
    assert _native(src, allow=True) == set()
    assert _native(src, allow=False) == {"vendor-library"}


def test_native_findings_point_at_the_line() -> None:
    (f,) = check_native({"kernels/a_binding.cpp": "// a\n\n" + _HOST.format("return at::relu(x);")}, False)
    assert (f.rule, f.file, f.line) == ("aten-compute", "kernels/a_binding.cpp", 4)


def test_inline_sources_collects_static_strings() -> None:
    src = """
from torch.utils.cpp_extension import load_inline as li
HEAD = "#include <x.h>\\n"
BODY = HEAD + "int f();"
CU = ["__global__ void k() {}", "int g();"]
e = li(name="e", cpp_sources=[BODY], cuda_sources=CU, functions=["f"])
other = li("o", "\\n".join(["a", "b"]))
"""
    got = inline_sources(src)
    assert got["BODY.cpp"] == "#include <x.h>\nint f();"
    assert sorted(v for k, v in got.items() if k.endswith(".cu")) == ["__global__ void k() {}", "int g();"]
    assert "a\nb" in got.values()
    assert inline_sources("def broken(:") == {}


# -- hostile input ------------------------------------------------------------------------------------------

JUNK = [
    "",
    "def f(:\n",
    "(" * 10_000 + ")" * 10_000,
    "x = " + "[" * 5_000 + "]" * 5_000,
    "x" + ".a" * 50_000,
    "x = 1" + " + 1" * 100_000,
    bytes(range(256)).decode("latin-1"),
    "\x00\x00import os",
    "class ModelNew(nn.Module):\n    def forward(self, x):\n" + "        x = x * 2\n" * 4_000,
    "x = 0\n" * 30_000,  # over the node limit: too-complex
]


@pytest.mark.parametrize("text", JUNK, ids=lambda t: f"{len(t)}-chars")
def test_python_never_raises(text: str) -> None:
    found = check_python({"solution.py": text})
    assert all(isinstance(f, Finding) for f in found)
    assert len(found) <= 200


def test_python_too_large_is_one_finding() -> None:
    assert [f.rule for f in check_python({"solution.py": "x = 0\n" * 30_000})] == ["too-complex"]


def test_python_syntax_error_is_one_finding() -> None:
    (f,) = check_python({"solution.py": "import torch\ndef f(:\n"})
    assert (f.rule, f.line) == ("syntax-error", 2)


NATIVE_JUNK = [
    "",
    "/* never closed",
    '"never closed',
    'R"abc( never closed',
    "{" * 20_000 + "}" * 10_000,
    "(" * 20_000,
    "/*" * 20_000,
    bytes(range(256)).decode("latin-1") * 100,
    "x.mm(" * 10_000,
    "static " * 10_000,
    "#include" * 10_000,
    "at::" * 10_000,
]


@pytest.mark.parametrize("text", NATIVE_JUNK, ids=lambda t: f"{len(t)}-chars")
def test_native_never_raises(text: str) -> None:
    found = check_native({"k.cu": text}, False)
    assert all(isinstance(f, Finding) for f in found)
    assert len(found) <= 200


def test_rules_are_documented() -> None:
    import evalsvc.core.static_checks as sc

    for rule in RULES:
        assert f"`{rule}`" in (sc.__doc__ or ""), rule
