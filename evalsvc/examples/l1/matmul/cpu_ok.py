import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

// C = A @ B for row-major A (M x K), B (K x N). Each task computes an MR x NR tile of C in a local
// accumulator (i-k-j order: the inner j loop is contiguous in B and C, so it vectorizes).
static constexpr int64_t MR = 4;
static constexpr int64_t NR = 64;

torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.device().is_cpu() && B.device().is_cpu(), "inputs must be CPU tensors");
    TORCH_CHECK(A.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32, "inputs must be float32");
    TORCH_CHECK(A.dim() == 2 && B.dim() == 2, "inputs must be 2-D");
    TORCH_CHECK(A.is_contiguous() && B.is_contiguous(), "inputs must be contiguous");
    TORCH_CHECK(A.size(1) == B.size(0), "inner dimensions differ");
    const int64_t M = A.size(0), K = A.size(1), N = B.size(1);
    auto C = torch::empty({M, N}, A.options());
    const float* __restrict__ a = A.data_ptr<float>();
    const float* __restrict__ b = B.data_ptr<float>();
    float* __restrict__ c = C.data_ptr<float>();
    const int64_t tiles_m = (M + MR - 1) / MR;
    const int64_t tiles_n = (N + NR - 1) / NR;
    #pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < tiles_m * tiles_n; ++t) {
        const int64_t i0 = (t % tiles_m) * MR;  // consecutive tasks share a column strip of B
        const int64_t j0 = (t / tiles_m) * NR;
        float acc[MR][NR];
        for (int64_t r = 0; r < MR; ++r)
            for (int64_t j = 0; j < NR; ++j) acc[r][j] = 0.0f;
        if (i0 + MR <= M && j0 + NR <= N) {
            for (int64_t k = 0; k < K; ++k) {
                const float* __restrict__ bk = b + k * N + j0;
                for (int64_t r = 0; r < MR; ++r) {
                    const float av = a[(i0 + r) * K + k];
                    for (int64_t j = 0; j < NR; ++j) acc[r][j] += av * bk[j];
                }
            }
            for (int64_t r = 0; r < MR; ++r)
                for (int64_t j = 0; j < NR; ++j) c[(i0 + r) * N + j0 + j] = acc[r][j];
        } else {  // edge tile
            const int64_t mr = M - i0 < MR ? M - i0 : MR;
            const int64_t nr = N - j0 < NR ? N - j0 : NR;
            for (int64_t k = 0; k < K; ++k) {
                const float* bk = b + k * N + j0;
                for (int64_t r = 0; r < mr; ++r) {
                    const float av = a[(i0 + r) * K + k];
                    for (int64_t j = 0; j < nr; ++j) acc[r][j] += av * bk[j];
                }
            }
            for (int64_t r = 0; r < mr; ++r)
                for (int64_t j = 0; j < nr; ++j) c[(i0 + r) * N + j0 + j] = acc[r][j];
        }
    }
    return C;
}
"""

matmul_ext = load_inline(
    name="evalsvc_ex_l1_matmul_cpu_ok",
    cpp_sources=[cpp_source],
    functions=["matmul_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul_ext.matmul_forward(A.contiguous(), B.contiguous())
