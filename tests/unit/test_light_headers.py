"""The light torch prelude for `.cu` files: which includes it replaces and which operator headers it
names. Whether the result builds (and the fallback when it does not) is tested with nvcc in
tests/integration/test_cuda_compile.py."""

from __future__ import annotations

from pathlib import Path

from evalsvc.compiler.light_headers import PRELUDE_NAME, lighten, operators_named, prelude, torch_ops_dir

SOURCE = """\
#include <torch/types.h>
#include <cuda.h>
  #  include <torch/extension.h>  // the usual
#include <c10/cuda/CUDAStream.h>
#include "ATen/ATen.h"
torch::Tensor f(torch::Tensor x) { return torch::empty_like(x); }
"""


def test_umbrella_includes_are_replaced_line_for_line() -> None:
    light = lighten(SOURCE)
    assert light is not None
    before, after = SOURCE.splitlines(), light.splitlines()
    assert len(before) == len(after)  # compiler diagnostics keep their line numbers
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert changed == [0, 2, 4]
    assert all(after[i] == f'#include "{PRELUDE_NAME}"' for i in changed)
    assert "#include <c10/cuda/CUDAStream.h>" in after and "#include <cuda.h>" in after


def test_a_source_without_umbrella_includes_is_left_alone() -> None:
    no_umbrella = '#include <cuda_runtime.h>\n#include "torch/extension.hpp"\n__global__ void k() {}\n'
    assert lighten(no_umbrella) is None
    assert lighten("// #include <torch/extension.h>: a comment, not an include\n") is None


def test_operators_are_the_named_ones_with_a_header(tmp_path: Path) -> None:
    for op in ("empty_like", "zeros", "matmul", "exp"):
        (tmp_path / f"{op}.h").write_text("")
    qualified = "auto y = torch::empty_like(x); auto z = at::zeros; torch::Tensor t;"
    assert operators_named([qualified], tmp_path) == ["empty_like", "zeros"]
    unqualified = "Tensor g(Tensor a, Tensor b) { return matmul(a, b); }  // exp(x) in a comment too"
    assert operators_named([qualified, unqualified], tmp_path) == ["empty_like", "exp", "matmul", "zeros"]
    assert operators_named(["float relu(float v); int n = max (1, 2);"], tmp_path) == []


def test_this_torch_has_per_operator_headers() -> None:
    ops = torch_ops_dir()
    assert (ops / "empty_like.h").is_file() and (ops / "matmul.h").is_file()
    assert operators_named(["torch::empty_like(x)"], ops) == ["empty_like"]


def test_prelude_includes_the_operators_and_torch_names() -> None:
    text = prelude(["empty_like", "zeros"])
    assert "#include <ATen/ops/empty_like.h>" in text and "#include <ATen/ops/zeros.h>" in text
    assert "#include <ATen/core/Tensor.h>" in text and "#include <ATen/Dispatch.h>" in text
    assert "kFloat32 = at::kFloat" in text and "using namespace at;" in text
