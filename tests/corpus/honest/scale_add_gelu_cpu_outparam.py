# style: CPU C++, one fused pass with std::tanh, output allocated in Python (out-parameter), shape asserts
# device: cpu
# task: l2/scale_add_gelu
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

// out = gelu_tanh(x * scale + y), scale broadcast over the last dimension.
void scale_add_gelu_into(torch::Tensor x, torch::Tensor y, torch::Tensor scale, torch::Tensor out) {
    TORCH_CHECK(x.sizes() == y.sizes() && x.sizes() == out.sizes(), "x, y and out must have one shape");
    TORCH_CHECK(x.size(-1) == scale.size(0), "scale must match the last dimension");
    TORCH_CHECK(x.is_contiguous() && y.is_contiguous() && scale.is_contiguous() && out.is_contiguous(),
                "contiguous tensors expected");
    const int64_t cols = scale.size(0), rows = x.numel() / cols;
    const float* xp = x.data_ptr<float>();
    const float* yp = y.data_ptr<float>();
    const float* sp = scale.data_ptr<float>();
    float* op = out.data_ptr<float>();
    const float k0 = 0.7978845608028654f, k1 = 0.044715f;  // sqrt(2 / pi), the cubic coefficient
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
            const int64_t i = r * cols + c;
            const float v = xp[i] * sp[c] + yp[i];
            op[i] = 0.5f * v * (1.0f + std::tanh(k0 * (v + k1 * v * v * v)));
        }
    }
}
"""

_fused = load_inline(
    name="evalsvc_honest_scale_add_gelu_cpu_outparam",
    cpp_sources=[cpp_source],
    functions=["scale_add_gelu_into"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        assert x.shape == y.shape and x.shape[-1] == self.scale.numel(), "shape mismatch"
        out = torch.empty_like(x, memory_format=torch.contiguous_format)
        _fused.scale_add_gelu_into(x.contiguous(), y.contiguous(), self.scale.contiguous(), out)
        return out
