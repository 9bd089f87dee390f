# style: CPU C++, at::parallel_for over a flat view, module-level helper function, load_inline aliased
# device: cpu
# task: l1/relu
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline as build

SRC = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>

torch::Tensor relu_flat(const torch::Tensor& x) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "float32 CPU tensor expected");
    TORCH_CHECK(x.dim() == 1 && x.is_contiguous(), "a contiguous 1-D view expected");
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    at::parallel_for(0, x.numel(), 1 << 16, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            const float v = in[i];
            o[i] = v < 0.0f ? 0.0f : v;
        }
    });
    return out;
}
"""

_relu = build(name="evalsvc_honest_relu_cpu_parallel_for", cpp_sources=SRC, functions=["relu_flat"],
              extra_cflags=["-O3"])


def _flat(t: torch.Tensor) -> torch.Tensor:
    """A contiguous 1-D view (a copy only when the input is strided)."""
    return t.contiguous().view(-1)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _relu.relu_flat(_flat(x)).view_as(x)
