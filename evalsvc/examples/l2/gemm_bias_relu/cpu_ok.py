import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

static constexpr int64_t MR = 4;
static constexpr int64_t NR = 64;
static constexpr int64_t TB = 32;

// out = relu(x @ W^T + b) with x (M x K), W (N x K) as stored by nn.Linear, b (N).
// W is first transposed into a K x N scratch buffer so that the inner loop of the tiled
// product runs over contiguous memory.
torch::Tensor linear_relu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.device().is_cpu() && weight.device().is_cpu() && bias.device().is_cpu(), "CPU tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                bias.scalar_type() == torch::kFloat32, "float32 expected");
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(), "contiguous tensors expected");
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && bias.dim() == 1, "x, weight must be 2-D and bias 1-D");
    TORCH_CHECK(x.size(1) == weight.size(1) && bias.size(0) == weight.size(0), "shape mismatch");
    const int64_t M = x.size(0), K = x.size(1), N = weight.size(0);
    auto out = torch::empty({M, N}, x.options());
    auto wt = torch::empty({K, N}, x.options());
    const float* __restrict__ a = x.data_ptr<float>();
    const float* __restrict__ w = weight.data_ptr<float>();
    const float* __restrict__ bs = bias.data_ptr<float>();
    float* __restrict__ bt = wt.data_ptr<float>();
    float* __restrict__ c = out.data_ptr<float>();

    const int64_t tn = (N + TB - 1) / TB, tk = (K + TB - 1) / TB;
    #pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < tn * tk; ++t) {
        const int64_t n0 = (t / tk) * TB, k0 = (t % tk) * TB;
        const int64_t n1 = n0 + TB < N ? n0 + TB : N, k1 = k0 + TB < K ? k0 + TB : K;
        for (int64_t n = n0; n < n1; ++n)
            for (int64_t k = k0; k < k1; ++k) bt[k * N + n] = w[n * K + k];
    }

    const int64_t tiles_m = (M + MR - 1) / MR, tiles_n = (N + NR - 1) / NR;
    #pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < tiles_m * tiles_n; ++t) {
        // i varies fastest, so consecutive tasks reuse the same K x NR strip of bt from cache
        const int64_t i0 = (t % tiles_m) * MR, j0 = (t / tiles_m) * NR;
        const int64_t mr = M - i0 < MR ? M - i0 : MR, nr = N - j0 < NR ? N - j0 : NR;
        float acc[MR][NR];
        for (int64_t r = 0; r < MR; ++r)
            for (int64_t j = 0; j < NR; ++j) acc[r][j] = 0.0f;
        if (mr == MR && nr == NR) {
            for (int64_t k = 0; k < K; ++k) {
                const float* __restrict__ bk = bt + k * N + j0;
                for (int64_t r = 0; r < MR; ++r) {
                    const float av = a[(i0 + r) * K + k];
                    for (int64_t j = 0; j < NR; ++j) acc[r][j] += av * bk[j];
                }
            }
        } else {
            for (int64_t k = 0; k < K; ++k) {
                const float* bk = bt + k * N + j0;
                for (int64_t r = 0; r < mr; ++r) {
                    const float av = a[(i0 + r) * K + k];
                    for (int64_t j = 0; j < nr; ++j) acc[r][j] += av * bk[j];
                }
            }
        }
        for (int64_t r = 0; r < mr; ++r)
            for (int64_t j = 0; j < nr; ++j) {
                const float v = acc[r][j] + bs[j0 + j];
                c[(i0 + r) * N + j0 + j] = v > 0.0f ? v : 0.0f;
            }
    }
    return out;
}
"""

gemm_ext = load_inline(
    name="evalsvc_ex_l2_gemm_bias_relu_cpu_ok",
    cpp_sources=[cpp_source],
    functions=["linear_relu_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        # Holds linear.weight / linear.bias under the same names as the reference; never called.
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gemm_ext.linear_relu_forward(
            x.contiguous(), self.linear.weight.contiguous(), self.linear.bias.contiguous()
        )
