"""Real builds of split sources (evalsvc.build.bindings): the candidate's units and the generated binding
units compiled and linked together as one extension with evalsvc.build.ninja_build; the CPU ones are
imported and checked against torch. CUDA ones compile and link only (no GPU needed), with
CUDA_HOME=/usr/local/cuda.

Each build takes 30-90 s, so the build directory is kept under $EVALSVC_TEST_DATA/bindings-build, keyed
by a hash of the sources, flags and toolchain: a rerun with unchanged sources builds nothing.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import time
from pathlib import Path
from types import ModuleType

import pytest
import torch
from torch.utils import cpp_extension as cx

from evalsvc.build.bindings import SplitSources, split_agent_tree, split_inline
from evalsvc.build.entry import AGENT_ENV
from evalsvc.build.inline import InlineCall, normalize_call
from evalsvc.build.light_headers import PRELUDE_NAME, lighten, operators_named, prelude, torch_ops_dir
from evalsvc.build.ninja_build import ExtensionBuild, build_extension, cuda_arch_flags
from evalsvc.cli_files import read_solution
from tests.unit.test_bindings import EXAMPLES, inline_calls

CACHE = Path(os.environ.get("EVALSVC_TEST_DATA", "/var/tmp/evalsvc-test")) / "bindings-build"
BUILD_TIMEOUT_S = 900
CUDA_READY = bool(cx.CUDA_HOME) and (Path(cx.CUDA_HOME or "/") / "include" / "cuda_runtime.h").is_file()
needs_cuda = pytest.mark.skipif(
    not CUDA_READY, reason="needs a CUDA toolkit: run with CUDA_HOME=/usr/local/cuda"
)


def lightened(units: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """The units with `.cu` ones against the light torch prelude, and the prelude header, as the compile
    job builds them first (nvcc through all of torch/extension.h is minutes on two cores)."""
    cuda = {rel: text for rel, text in units.items() if rel.endswith(".cu")}
    light = {rel: t for rel, text in cuda.items() if (t := lighten(text)) is not None}
    header = prelude(operators_named(list(cuda.values()), torch_ops_dir()))
    return {**units, **light}, {str(Path(rel).parent / PRELUDE_NAME): header for rel in light}


def build(
    name: str,
    units: dict[str, str],
    cflags: list[str],
    ldflags: list[str],
    cuda_cflags: list[str] | None = None,
    headers: dict[str, str] | None = None,
    include: tuple[str, ...] = (),
) -> tuple[Path, float]:
    """The built library and the seconds its build took (0 when the cached build was reused)."""
    recipe = [
        name,
        units,
        headers or {},
        cflags,
        ldflags,
        cuda_cflags,
        include,
        torch.__version__,
        cx.CUDA_HOME,
    ]
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]
    root = CACHE / f"{name}-{key}"
    lib = root / "build" / f"{name}.so"
    if lib.is_file():
        return lib, 0.0
    for rel, text in {**units, **(headers or {})}.items():
        path = root / "src" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text() != text:  # unchanged files keep ninja incremental
            path.write_text(text)
    sources = [root / "src" / rel for rel in sorted(units)]
    b = ExtensionBuild(
        name,
        sources,
        root / "build",
        cflags,
        cuda_cflags or [],
        ldflags,
        [root / "src" / d for d in include],
        cuda_cflags is not None,
    )
    start = time.monotonic()
    res = build_extension(b, BUILD_TIMEOUT_S, jobs=2)
    assert res.ok, res.log[-4000:]
    return lib, time.monotonic() - start


def load(name: str, lib: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, lib)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_inline(call: InlineCall, split: SplitSources, cuda: bool = False) -> tuple[ModuleType, float]:
    name = f"{call.name}_split"
    units, headers = {**split.own, **split.binding}, {}
    cuda_cflags = None
    if cuda:
        units, headers = lightened(units)
        cuda_cflags = [*call.extra_cuda_cflags, *cuda_arch_flags("90a")]
    lib, seconds = build(name, units, call.extra_cflags, call.extra_ldflags, cuda_cflags, headers)
    return load(name, lib), seconds


def test_cpu_example_builds_and_runs() -> None:
    (call,) = inline_calls(EXAMPLES / "l1" / "relu" / "cpu_ok.py")
    module, seconds = build_inline(call, split_inline(call))
    print(f"relu cpu_ok build: {seconds:.1f} s")
    x = torch.randn(4099)
    assert torch.equal(module.relu_forward(x), torch.relu(x))


OWN_BLOCK = r"""
#include <torch/extension.h>
namespace py = pybind11;
using torch::Tensor;

// x * s, then max(., 0) when relu; `static inline`, so the binding could not reach it as written.
static inline Tensor scale_relu(const Tensor& x, double s, bool relu) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.is_contiguous(), "contiguous float32 expected");
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {
        const float v = in[i] * static_cast<float>(s);
        o[i] = relu && v < 0.0f ? 0.0f : v;
    }
    return out;
}

static Tensor twice(Tensor x);  // declared static, defined below without it: internal linkage still

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.doc() = "split test";
    m.def("scale_relu", &scale_relu, "x * s, relu'd", py::arg("x"), py::arg("s") = 0.5,
          py::arg("relu") = true);
    m.def("twice", twice);
}

Tensor twice(Tensor x) { return scale_relu(x, 2.0, false); }
"""


def test_own_pybind11_block_with_static_functions_builds_and_runs() -> None:
    call = normalize_call(
        ("evalsvc_t_bindings_own_block",), {"cpp_sources": OWN_BLOCK, "extra_cflags": ["-O2"]}
    )
    split = split_inline(call)
    assert "static inline Tensor scale_relu" not in split.own["main.cpp"]
    module, seconds = build_inline(call, split)
    print(f"own PYBIND11_MODULE block build: {seconds:.1f} s")
    x = torch.randn(1000)
    assert module.__doc__ == "split test"
    assert torch.equal(module.scale_relu(x), torch.relu(x * 0.5))  # the default arguments survived
    assert torch.equal(module.scale_relu(x, s=2.0, relu=False), x * 2.0)
    assert torch.equal(module.twice(x), x * 2.0)


@needs_cuda
def test_cuda_example_compiles_and_links() -> None:
    (call,) = inline_calls(EXAMPLES / "l1" / "relu" / "cuda_ok.py")
    module, seconds = build_inline(call, split_inline(call), cuda=True)
    print(f"relu cuda_ok build: {seconds:.1f} s")
    assert callable(module.relu_forward)  # imports without a GPU; calling it would need one


@needs_cuda
def test_cuda_agent_tree_compiles_and_links() -> None:
    files = read_solution(EXAMPLES / "l2" / "gemm_bias_relu" / "cuda_agent").files
    split = split_agent_tree(files)
    env = {f.name: f.read_text() for f in AGENT_ENV.iterdir() if f.suffix in (".cpp", ".h")}
    units = {**split.own, **split.binding, "binding.cpp": env["binding.cpp"]}
    headers = {"binding_registry.h": env["binding_registry.h"]}
    headers |= {rel: text for rel, text in files.items() if rel.endswith((".h", ".cuh", ".hpp"))}
    cuda_cflags = ["-O3", "--use_fast_math", *cuda_arch_flags("90a")]
    lib, seconds = build("cuda_extension", units, ["-O3"], [], cuda_cflags, headers, include=(".", "kernels"))
    print(f"CUDA Agent tree build: {seconds:.1f} s")
    module = load("cuda_extension", lib)
    assert callable(module.gemm_bias_relu)
    assert "relu(x @ weight^T + bias)" in (module.gemm_bias_relu.__doc__ or "")
