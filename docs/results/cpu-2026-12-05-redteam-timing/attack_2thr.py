# style: CPU C++, i-k-j GEMM over a transposed weight in std::vector scratch, bias+ReLU fused; nn.Linear holds the parameters
# device: cpu
# task: l2/gemm_bias_relu
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <vector>

// out = relu(x @ w^T + b) with w stored N x K (nn.Linear). w is transposed once into K x N scratch so
// the innermost loop runs over contiguous memory.
torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    TORCH_CHECK(x.device().is_cpu() && w.device().is_cpu() && b.device().is_cpu(), "CPU tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 &&
                b.scalar_type() == torch::kFloat32, "float32 expected");
    TORCH_CHECK(x.is_contiguous() && w.is_contiguous() && b.is_contiguous(), "contiguous tensors expected");
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && b.size(0) == w.size(0), "shape mismatch");
    const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
    const float* xp = x.data_ptr<float>();
    const float* wp = w.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    std::vector<float> wt(K * N);
    for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) wt[k * N + n] = wp[n * K + k];
    auto out = torch::empty({M, N}, x.options());
    float* op = out.data_ptr<float>();
    #pragma omp parallel for schedule(static) num_threads(2)
    for (int64_t i = 0; i < M; ++i) {
        float* row = op + i * N;
        for (int64_t j = 0; j < N; ++j) row[j] = bp[j];
        for (int64_t k = 0; k < K; ++k) {
            const float a = xp[i * K + k];
            const float* wr = wt.data() + k * N;
            for (int64_t j = 0; j < N; ++j) row[j] += a * wr[j];
        }
        for (int64_t j = 0; j < N; ++j) row[j] = row[j] > 0.0f ? row[j] : 0.0f;
    }
    return out;
}
"""

gemm_ext = load_inline(
    name="redteam_two_threads_ikj",
    cpp_sources=[cpp_source],
    functions=["linear_relu"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # parameters only, never called

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2:
            raise ValueError(f"expected a 2-D input, got shape {tuple(x.shape)}")
        w, b = self.linear.weight, self.linear.bias
        return gemm_ext.linear_relu(x.contiguous(), w.contiguous(), b.contiguous())
