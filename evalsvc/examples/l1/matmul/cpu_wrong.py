import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Deliberately wrong (expect: incorrect): B is indexed as if it were stored transposed, so this
# computes A @ B.T instead of A @ B.
cpp_source = r"""
#include <torch/extension.h>

torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.device().is_cpu() && B.device().is_cpu(), "inputs must be CPU tensors");
    TORCH_CHECK(A.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32, "inputs must be float32");
    TORCH_CHECK(A.dim() == 2 && B.dim() == 2, "inputs must be 2-D");
    TORCH_CHECK(A.is_contiguous() && B.is_contiguous(), "inputs must be contiguous");
    TORCH_CHECK(A.size(1) == B.size(0) && B.size(0) == B.size(1), "this kernel wants square B");
    const int64_t M = A.size(0), K = A.size(1), N = B.size(1);
    auto C = torch::empty({M, N}, A.options());
    const float* a = A.data_ptr<float>();
    const float* b = B.data_ptr<float>();
    float* c = C.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < M; ++i) {
        const float* ai = a + i * K;
        for (int64_t j = 0; j < N; ++j) {
            const float* bj = b + j * K;  // BUG: row j of B, should be column j (b[k * N + j])
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            int64_t k = 0;
            for (; k + 8 <= K; k += 8)
                for (int l = 0; l < 8; ++l) acc[l] += ai[k + l] * bj[k + l];
            float s = 0.0f;
            for (int l = 0; l < 8; ++l) s += acc[l];
            for (; k < K; ++k) s += ai[k] * bj[k];
            c[i * N + j] = s;
        }
    }
    return C;
}
"""

matmul_ext = load_inline(
    name="evalsvc_ex_l1_matmul_cpu_wrong",
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
