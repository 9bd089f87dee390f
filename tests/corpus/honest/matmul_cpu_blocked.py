# style: CPU C++, blocked matmul with a packed B panel in a std::vector scratch, OpenMP over rows
# device: cpu
# task: l1/matmul
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <algorithm>
#include <vector>

// C = A @ B (row-major). K is cut into KB-deep slabs and N into NB-wide panels; each panel of B is
// copied into contiguous scratch once and reused by every row of A.
torch::Tensor matmul_blocked(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.device().is_cpu() && B.device().is_cpu(), "CPU tensors expected");
    TORCH_CHECK(A.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32, "float32 expected");
    TORCH_CHECK(A.dim() == 2 && B.dim() == 2 && A.size(1) == B.size(0), "shape mismatch");
    A = A.contiguous();
    B = B.contiguous();
    const int64_t M = A.size(0), K = A.size(1), N = B.size(1);
    auto C = torch::zeros({M, N}, A.options());
    const float* a = A.data_ptr<float>();
    const float* b = B.data_ptr<float>();
    float* c = C.data_ptr<float>();
    constexpr int64_t KB = 128, NB = 256;
    for (int64_t k0 = 0; k0 < K; k0 += KB) {
        const int64_t k1 = std::min(K, k0 + KB);
        for (int64_t n0 = 0; n0 < N; n0 += NB) {
            const int64_t n1 = std::min(N, n0 + NB), nw = n1 - n0;
            std::vector<float> panel((k1 - k0) * nw);
            for (int64_t k = k0; k < k1; ++k)
                std::copy(b + k * N + n0, b + k * N + n1, panel.begin() + (k - k0) * nw);
            #pragma omp parallel for schedule(static)
            for (int64_t i = 0; i < M; ++i) {
                float* crow = c + i * N + n0;
                const float* arow = a + i * K;
                for (int64_t k = k0; k < k1; ++k) {
                    const float av = arow[k];
                    const float* prow = panel.data() + (k - k0) * nw;
                    for (int64_t j = 0; j < nw; ++j) crow[j] += av * prow[j];
                }
            }
        }
    }
    return C;
}
"""

matmul_ext = load_inline(
    name="evalsvc_honest_matmul_cpu_blocked",
    cpp_sources=[cpp_source],
    functions=["matmul_blocked"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        if A.dim() != 2 or B.dim() != 2:
            raise ValueError(f"2-D inputs expected, got {tuple(A.shape)} and {tuple(B.shape)}")
        return matmul_ext.matmul_blocked(A, B)
