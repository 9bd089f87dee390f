import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Deliberately broken (expect: compile_error): `x.sizes()` is an IntArrayRef, which does not convert
# to int64_t, and `y.data_ptr<float>()` is assigned to an int pointer. g++ rejects both.
cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor scale_add_gelu_forward(torch::Tensor x, torch::Tensor y, torch::Tensor scale) {
    auto out = torch::empty_like(x);
    const int64_t n = x.sizes();
    const int64_t d = scale.size(0);
    const float* xp = x.data_ptr<float>();
    const int* yp = y.data_ptr<float>();
    const float* sp = scale.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) {
        const float v = xp[i] * sp[i % d] + yp[i];
        const float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
        o[i] = 0.5f * v * (1.0f + std::tanh(u));
    }
    return out;
}
"""

fused_ext = load_inline(
    name="evalsvc_ex_l2_scale_add_gelu_cpu_compile_error",
    cpp_sources=[cpp_source],
    functions=["scale_add_gelu_forward"],
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(torch.empty(dim))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return fused_ext.scale_add_gelu_forward(x.contiguous(), y.contiguous(), self.scale.contiguous())
