import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Deliberately wrong (expect: incorrect): an off-by-one in the index shifts the whole output by one
# element, out[i] = relu(x[i + 1]), and the last element is left at zero.
cpp_source = r"""
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    auto out = torch::zeros(x.sizes(), x.options());
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = x.numel();
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n - 1; ++i) {
        const float v = in[i + 1];  // BUG: should be in[i]
        o[i] = v > 0.0f ? v : 0.0f;
    }
    return out;
}
"""

relu_ext = load_inline(
    name="evalsvc_ex_l1_relu_cpu_wrong",
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
