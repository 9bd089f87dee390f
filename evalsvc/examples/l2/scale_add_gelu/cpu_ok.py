import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cstdint>
#include <cstring>

// exp(x) by range reduction and a degree-6 polynomial (relative error ~2e-7 on [-87, 87]); plain
// arithmetic so that the loop calling it vectorizes (std::tanh would stay a scalar libm call).
static inline float exp_poly(float x) {
    x = x < -87.0f ? -87.0f : (x > 87.0f ? 87.0f : x);
    const float t = x * 1.44269504088896341f;
    const float fn = (t + 12582912.0f) - 12582912.0f;   // round to nearest integer
    const float r = (x - fn * 0.693145751953125f) - fn * 1.428606765330187e-06f;
    float p = 1.3888888e-3f;
    p = p * r + 8.3333333e-3f;
    p = p * r + 4.1666667e-2f;
    p = p * r + 1.6666667e-1f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int32_t bits = ((int32_t)fn + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof(scale));
    return p * scale;
}

// gelu_tanh(v) = 0.5 v (1 + tanh(u)), u = sqrt(2/pi) (v + 0.044715 v^3); 1 + tanh(u) = 2 - 2 / (e^{2u} + 1).
static inline float gelu_tanh(float v) {
    float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    u = u < -10.0f ? -10.0f : (u > 10.0f ? 10.0f : u);
    const float e = exp_poly(2.0f * u);
    return v * (1.0f - 1.0f / (e + 1.0f));
}

torch::Tensor scale_add_gelu_forward(torch::Tensor x, torch::Tensor y, torch::Tensor scale) {
    TORCH_CHECK(x.device().is_cpu() && y.device().is_cpu() && scale.device().is_cpu(), "CPU tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && y.scalar_type() == torch::kFloat32 &&
                scale.scalar_type() == torch::kFloat32, "float32 expected");
    TORCH_CHECK(x.is_contiguous() && y.is_contiguous() && scale.is_contiguous(), "contiguous tensors expected");
    TORCH_CHECK(x.sizes() == y.sizes(), "x and y must have the same shape");
    TORCH_CHECK(scale.dim() == 1 && x.dim() >= 1 && x.size(-1) == scale.size(0), "scale must match x's last dim");
    auto out = torch::empty_like(x);
    const int64_t d = scale.size(0);
    const int64_t rows = d == 0 ? 0 : x.numel() / d;
    const float* __restrict__ xp = x.data_ptr<float>();
    const float* __restrict__ yp = y.data_ptr<float>();
    const float* __restrict__ sp = scale.data_ptr<float>();
    float* __restrict__ o = out.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* __restrict__ xr = xp + r * d;
        const float* __restrict__ yr = yp + r * d;
        float* __restrict__ orow = o + r * d;
        for (int64_t j = 0; j < d; ++j) orow[j] = gelu_tanh(xr[j] * sp[j] + yr[j]);
    }
    return out;
}
"""

fused_ext = load_inline(
    name="evalsvc_ex_l2_scale_add_gelu_cpu_ok",
    cpp_sources=[cpp_source],
    functions=["scale_add_gelu_forward"],
    extra_cflags=["-O3", "-fno-trapping-math", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(torch.empty(dim))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return fused_ext.scale_add_gelu_forward(x.contiguous(), y.contiguous(), self.scale.contiguous())
