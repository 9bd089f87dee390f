"""Real CUDA builds in the Docker sandbox (nvcc, no GPU needed): `.cu` files are built against the light
torch prelude when that compiles, as written when it does not, and errors point at the lines written."""

from __future__ import annotations

import pytest

from evalsvc.cli_files import read_solution
from evalsvc.core.results import Status
from evalsvc.core.solutions import Solution
from evalsvc.suite import EXAMPLES

pytestmark = pytest.mark.docker

RELU = EXAMPLES / "l1" / "relu"


def relu_variant(marker: str, old: str = "", new: str = "") -> Solution:
    """The honest CUDA ReLU with one edit; `marker` keeps each test's build its own (cache key)."""
    sol = read_solution(RELU / "cuda_ok.py")
    ((name, text),) = sol.files.items()
    assert old in text
    text = text.replace(old, new, 1).replace("#include <cstdint>", f"#include <cstdint>\n// {marker}", 1)
    return Solution(files={name: text})


@pytest.fixture
def full_build(pipeline):  # type: ignore[no-untyped-def]
    """The build as written (the light prelude is its first try); the fast path is test_fast_path's."""
    pipeline.compiler.fast_path = False
    yield pipeline
    pipeline.compiler.fast_path = True


def test_cuda_source_builds_with_the_light_prelude(full_build) -> None:  # type: ignore[no-untyped-def]
    outcome = full_build.compiler.compile(relu_variant("light-prelude test"))
    assert outcome.status is Status.OK, outcome.message
    assert outcome.report.light_headers
    kernels = {r.kernel for r in outcome.report.resources}
    assert any("relu_vec4_kernel" in k for k in kernels), kernels  # ptxas ran on the real kernels


def test_cuda_source_that_needs_more_of_torch_is_built_as_written(full_build) -> None:  # type: ignore[no-untyped-def]
    """`at::parallel_for` (ATen/Parallel.h, which torch/extension.h includes) is allowed to a kernel's
    host code but not in the prelude: the light attempt fails in the front end, then the build as
    written succeeds."""
    sol = relu_variant(
        "needs ATen/Parallel.h",
        "auto out = torch::empty_like(x);",
        "at::parallel_for(0, 1, 1, [](int64_t, int64_t) {}); auto out = torch::empty_like(x);",
    )
    outcome = full_build.compiler.compile(sol)
    assert outcome.status is Status.OK, outcome.message
    assert not outcome.report.light_headers


def test_cuda_compile_error_points_at_the_written_line(pipeline) -> None:  # type: ignore[no-untyped-def]
    broken = "auto out = torch::empty_like(x);"
    sol = relu_variant("compile error test", broken, "auto out = torch::empty_like(x)")  # no semicolon
    outcome = pipeline.compiler.compile(sol)
    assert outcome.status is Status.COMPILE_ERROR
    assert not outcome.report.light_headers
    errors = [d for d in outcome.report.diagnostics if d.severity == "error"]
    assert errors and errors[0].file and errors[0].file.endswith("cuda.cu"), outcome.report.diagnostics
    (text,) = sol.files.values()
    cuda_source = text.split('cuda_source = r"""', 1)[1].split('"""', 1)[0]
    # load_inline puts three include lines in front of the solution's CUDA text
    written = 3 + next(i for i, line in enumerate(cuda_source.split("\n")) if "empty_like(x)" in line) + 1
    assert errors[0].line in (written, written + 1), (errors[0], written)


def test_cuda_agent_tree_builds(pipeline) -> None:  # type: ignore[no-untyped-def]
    """The bundled CUDA Agent tree: its binding includes `ATen/cuda/CUDAContext.h` (which needs
    cuSPARSE's and cuBLAS's headers, from NVIDIA's wheels here) and builds with torch's C++ standard."""
    sol = read_solution(EXAMPLES / "l2" / "gemm_bias_relu" / "cuda_agent")
    outcome = pipeline.compiler.compile(sol)
    assert outcome.status is Status.OK, (outcome.message, outcome.report.log_excerpt[-2000:])
    assert any("splitk_reduce_kernel" in r.kernel for r in outcome.report.resources), outcome.report.resources
