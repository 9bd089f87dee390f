import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Deliberately failing at run time (expect: runtime_error): it builds and imports fine, but the
# shape check compares x's feature count with the weight's *output* dimension (size(0)) instead of
# its input dimension, and the TORCH_CHECK throws on the first call (out_features != in_features).
cpp_source = r"""
#include <torch/extension.h>

torch::Tensor linear_relu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && bias.dim() == 1, "x, weight must be 2-D and bias 1-D");
    TORCH_CHECK(x.size(1) == weight.size(0),  // BUG: should be weight.size(1)
                "linear_relu_forward: x has ", x.size(1), " features but weight has ", weight.size(0));
    const int64_t M = x.size(0), K = x.size(1), N = weight.size(0);
    auto out = torch::empty({M, N}, x.options());
    const float* a = x.data_ptr<float>();
    const float* w = weight.data_ptr<float>();
    const float* b = bias.data_ptr<float>();
    float* c = out.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < M; ++i)
        for (int64_t n = 0; n < N; ++n) {
            float s = b[n];
            for (int64_t k = 0; k < K; ++k) s += a[i * K + k] * w[n * K + k];
            c[i * N + n] = s > 0.0f ? s : 0.0f;
        }
    return out;
}
"""

gemm_ext = load_inline(
    name="evalsvc_ex_l2_gemm_bias_relu_cpu_crash",
    cpp_sources=[cpp_source],
    functions=["linear_relu_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gemm_ext.linear_relu_forward(
            x.contiguous(), self.linear.weight.contiguous(), self.linear.bias.contiguous()
        )
