# style: CPU C++, online softmax (running max and rescaled sum in one pass), rows in parallel; reshape glue
# device: cpu
# task: l1/softmax
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>
#include <limits>

torch::Tensor softmax_rows(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "float32 CPU tensor expected");
    TORCH_CHECK(x.dim() == 2 && x.is_contiguous(), "contiguous 2-D input expected");
    const int64_t rows = x.size(0), cols = x.size(1);
    auto y = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = in + r * cols;
        float* yr = out + r * cols;
        float m = -std::numeric_limits<float>::infinity();
        float s = 0.0f;
        for (int64_t c = 0; c < cols; ++c) {
            const float v = xr[c];
            if (v > m) {
                s = s * std::exp(m - v) + 1.0f;  // the old sum, rescaled to the new max
                m = v;
            } else {
                s += std::exp(v - m);
            }
        }
        const float inv = 1.0f / s;
        for (int64_t c = 0; c < cols; ++c) yr[c] = std::exp(xr[c] - m) * inv;
    }
    return y;
}
"""

softmax_ext = load_inline(
    name="evalsvc_honest_softmax_cpu_online",
    cpp_sources=[cpp_source],
    functions=["softmax_rows"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        rows = x.reshape(-1, shape[-1]).contiguous()
        return softmax_ext.softmax_rows(rows).view(shape)
