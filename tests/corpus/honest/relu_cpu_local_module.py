# style: CPU C++ chunked loop behind a local nn.Module wrapper used as a submodule; math/typing/__future__ imports
# device: cpu
# task: l1/relu
from __future__ import annotations

import math
from typing import Final

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>

// ReLU over a flat tensor in chunks of `grain` elements, one OpenMP task per chunk.
torch::Tensor relu_chunked(torch::Tensor flat, int64_t grain) {
    TORCH_CHECK(flat.dim() == 1 && flat.is_contiguous() && flat.scalar_type() == torch::kFloat32, "flat float32 input expected");
    TORCH_CHECK(grain > 0, "grain must be positive");
    auto out = torch::empty_like(flat);
    const float* src = flat.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const int64_t n = flat.numel(), chunks = (n + grain - 1) / grain;
    #pragma omp parallel for schedule(dynamic, 1)
    for (int64_t c = 0; c < chunks; ++c) {
        const int64_t lo = c * grain, hi = lo + grain < n ? lo + grain : n;
        for (int64_t i = lo; i < hi; ++i) dst[i] = src[i] > 0.0f ? src[i] : 0.0f;
    }
    return out;
}
"""


class _ReluKernel(nn.Module):
    """The extension behind a module, so ModelNew reads like a model."""

    GRAIN: Final[int] = 1 << 15

    def forward(self, flat: torch.Tensor) -> torch.Tensor:
        return _EXT.relu_chunked(flat, self.GRAIN)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.kernel = _ReluKernel()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = math.prod(x.shape)
        return self.kernel(x.contiguous().reshape(n)).view(x.shape)


_EXT = load_inline(
    name="evalsvc_honest_relu_cpu_local_module",
    cpp_sources=[_SOURCE],
    functions=["relu_chunked"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)
