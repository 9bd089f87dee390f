import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    auto out = torch::empty_like(x);
    const float* __restrict__ in = x.data_ptr<float>();
    float* __restrict__ o = out.data_ptr<float>();
    const int64_t n = x.numel();
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const float v = in[i];
        o[i] = v < 0.0f ? 0.0f : v;
    }
    return out;
}
"""

relu_ext = load_inline(
    name="evalsvc_ex_l1_relu_cpu_ok",
    cpp_sources=[cpp_source],
    functions=["relu_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_forward(x.contiguous())
