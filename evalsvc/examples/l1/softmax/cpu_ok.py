import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cstdint>
#include <cstring>

// exp(x) for x <= 0 (softmax arguments after max subtraction), written with plain arithmetic so
// that the compiler vectorizes the loops that call it (std::exp would stay a scalar libm call).
// Range reduction x = n*ln2 + r, |r| <= ln2/2, then a degree-6 polynomial; relative error ~2e-7.
static inline float exp_nonpos(float x) {
    x = x < -87.0f ? -87.0f : x;
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

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    TORCH_CHECK(x.dim() >= 1 && x.size(-1) > 0, "x must have a non-empty last dimension");
    auto out = torch::empty_like(x);
    const int64_t cols = x.size(-1);
    const int64_t rows = x.numel() / cols;
    const float* __restrict__ in = x.data_ptr<float>();
    float* __restrict__ o = out.data_ptr<float>();
    constexpr int L = 16;  // independent partial results, so that the reductions vectorize
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* __restrict__ xr = in + r * cols;
        float* __restrict__ yr = o + r * cols;
        const int64_t main = cols - cols % L;
        // 1) row max
        float mx[L];
        for (int l = 0; l < L; ++l) mx[l] = -INFINITY;
        for (int64_t j = 0; j < main; j += L)
            for (int l = 0; l < L; ++l) mx[l] = xr[j + l] > mx[l] ? xr[j + l] : mx[l];
        float m = -INFINITY;
        for (int l = 0; l < L; ++l) m = mx[l] > m ? mx[l] : m;
        for (int64_t j = main; j < cols; ++j) m = xr[j] > m ? xr[j] : m;
        // 2) exponentials
        for (int64_t j = 0; j < cols; ++j) yr[j] = exp_nonpos(xr[j] - m);
        // 3) their sum
        float sm[L];
        for (int l = 0; l < L; ++l) sm[l] = 0.0f;
        for (int64_t j = 0; j < main; j += L)
            for (int l = 0; l < L; ++l) sm[l] += yr[j + l];
        float s = 0.0f;
        for (int l = 0; l < L; ++l) s += sm[l];
        for (int64_t j = main; j < cols; ++j) s += yr[j];
        // 4) normalise
        const float inv = 1.0f / s;
        for (int64_t j = 0; j < cols; ++j) yr[j] *= inv;
    }
    return out;
}
"""

softmax_ext = load_inline(
    name="evalsvc_ex_l1_softmax_cpu_ok",
    cpp_sources=[cpp_source],
    functions=["softmax_forward"],
    extra_cflags=["-O3", "-fno-trapping-math", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_ext.softmax_forward(x.contiguous())
