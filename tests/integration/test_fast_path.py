"""The compile fast path (evalsvc/compiler/fast_path.py) with real compilers in the Docker sandbox:
load_inline extensions built against the torch stand-in, the same verdicts as the build as written,
fallbacks with their reason."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from evalsvc.core.options import EvalOptions
from evalsvc.core.results import Status
from evalsvc.core.solutions import Solution
from evalsvc.suite import cases
from tests.corpus.reader import small_task

pytestmark = pytest.mark.docker
FAST = EvalOptions(trials=3, timing_budget_s=0.3, compile_baseline=False, timing_pool=2)
# One solution per verdict kind the bundled CPU suite has (ok, incorrect, ...): CI's time, not coverage,
# decides the number; test_engine_cpu judges all of them with the fast path on.
INLINE_CPU = list({c.expect: c for c in cases("cpu") if c.solution_path.suffix == ".py"}.values())
INLINE_CUDA_OK = [c for c in cases("cuda") if c.expect == "ok" and c.solution_path.suffix == ".py"]


@contextmanager
def fast_path(pipeline, on: bool) -> Iterator[None]:
    before = pipeline.compiler.fast_path
    pipeline.compiler.fast_path = on
    try:
        yield
    finally:
        pipeline.compiler.fast_path = before


@pytest.mark.parametrize("case", INLINE_CUDA_OK, ids=lambda c: c.name)
def test_bundled_cuda_solution_builds_on_the_fast_path(pipeline, case) -> None:
    outcome = pipeline.compiler.compile(case.solution())
    assert outcome.status is Status.OK, outcome.message
    assert outcome.report.fast_path, outcome.report.fast_path_reason
    assert outcome.report.resources, "ptxas reported no kernel: nvcc did not build the device code"


def test_fast_path_off_builds_as_written(pipeline) -> None:
    sol = INLINE_CUDA_OK[0].solution()
    ((name, text),) = sol.files.items()
    sol = Solution(files={name: text + "\n# fast path off\n"})  # its own cache key
    with fast_path(pipeline, False):
        outcome = pipeline.compiler.compile(sol)
    assert outcome.status is Status.OK, outcome.message
    assert outcome.report.fast_path is False and outcome.report.fast_path_reason == "fast path off"


CPU_SHIM_API = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <vector>
#define CHECK_CPU(x) TORCH_CHECK(!x.is_cuda(), #x " must be a CPU tensor")

// A scaled leaky ReLU over a contiguous copy, written with the calls model-written host code makes.
std::vector<torch::Tensor> leaky(torch::Tensor x, double slope, int64_t repeat, bool flat) {
  CHECK_CPU(x);
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32, got ", x.scalar_type());
  TORCH_CHECK(repeat >= 1, "repeat must be positive, got ", repeat, " for sizes ", x.sizes());
  auto xc = x.contiguous();
  auto out = torch::empty({xc.size(0), xc.size(-1)}, xc.options());
  auto count = torch::zeros({1}, torch::TensorOptions().dtype(torch::kInt64));
  const float* in = xc.data_ptr<float>();
  float* o = out.data_ptr<float>();
  int64_t* c = count.data_ptr<int64_t>();
  for (int64_t r = 0; r < repeat; ++r)
    for (int64_t i = 0; i < xc.numel(); ++i) {
      o[i] = in[i] > 0 ? in[i] : static_cast<float>(slope) * in[i];
      c[0] += in[i] > 0;
    }
  return {flat ? out.view({-1}) : out, count};
}
"""

ext = load_inline(
    name="fast_path_cpu_api",
    cpp_sources=[cpp_source],
    functions=["leaky"],
    extra_cflags=["-O2"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out, count = ext.leaky(x, 0.0, 1, False)
        return out
'''


def test_cpu_extension_on_the_fast_path_runs_like_torch(pipeline) -> None:
    """Built against the stand-in, linked with the bridge, loaded and judged on the CPU device: metadata,
    factories, views, data pointers and the scalar arguments behave as torch's do."""
    sol = Solution(files={"solution.py": CPU_SHIM_API})
    outcome = pipeline.compiler.compile(sol)
    assert outcome.status is Status.OK and outcome.report.fast_path, (outcome.message, outcome.report)
    result = pipeline.evaluate(small_task("l1/relu"), sol, FAST)
    assert result.status is Status.OK and result.correct, result.message


@pytest.mark.parametrize("case", INLINE_CPU, ids=lambda c: c.name)
def test_cpu_verdict_is_the_same_with_the_fast_path_off(pipeline, case) -> None:
    """test_engine_cpu judges the bundled CPU solutions with the fast path on; here off, same verdicts."""
    sol = case.solution()
    with fast_path(pipeline, False):
        result = pipeline.evaluate(small_task(case.task_id), sol, FAST)
    assert result.status.value == case.expect, result.message
    if result.compile is not None and result.compile.fast_path is not None:
        assert result.compile.fast_path is False
