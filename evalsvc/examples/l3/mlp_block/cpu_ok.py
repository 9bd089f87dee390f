import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

static constexpr int64_t MR = 4;
static constexpr int64_t NR = 64;
static constexpr int64_t TB = 32;

// dst (K x N) = src^T for src (N x K).
static void transpose(const float* __restrict__ src, float* __restrict__ dst, int64_t N, int64_t K) {
    const int64_t tn = (N + TB - 1) / TB, tk = (K + TB - 1) / TB;
    #pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < tn * tk; ++t) {
        const int64_t n0 = (t / tk) * TB, k0 = (t % tk) * TB;
        const int64_t n1 = n0 + TB < N ? n0 + TB : N, k1 = k0 + TB < K ? k0 + TB : K;
        for (int64_t n = n0; n < n1; ++n)
            for (int64_t k = k0; k < k1; ++k) dst[k * N + n] = src[n * K + k];
    }
}

// c (M x N) = epilogue(a (M x K) @ bt (K x N) + bias); epilogue 0: exact GELU, 1: add residual res (M x N).
static void gemm_bias(const float* __restrict__ a, const float* __restrict__ bt, const float* __restrict__ bias,
                      const float* __restrict__ res, float* __restrict__ c, int64_t M, int64_t K, int64_t N,
                      int epilogue) {
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
                const int64_t idx = (i0 + r) * N + j0 + j;
                const float v = acc[r][j] + bias[j0 + j];
                c[idx] = epilogue == 0 ? 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f)) : v + res[idx];
            }
    }
}

// out = x + fc2(gelu(fc1(layernorm(x)))), x (T x D), w1 (H x D), w2 (D x H) in nn.Linear layout.
torch::Tensor mlp_block_forward(torch::Tensor x, torch::Tensor ln_w, torch::Tensor ln_b, double eps,
                                torch::Tensor w1, torch::Tensor b1, torch::Tensor w2, torch::Tensor b2) {
    for (const auto& t : {x, ln_w, ln_b, w1, b1, w2, b2}) {
        TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == torch::kFloat32 && t.is_contiguous(),
                    "contiguous float32 CPU tensors expected");
    }
    TORCH_CHECK(x.dim() == 2, "x must be 2-D (tokens x dim)");
    const int64_t T = x.size(0), D = x.size(1), H = w1.size(0);
    TORCH_CHECK(ln_w.numel() == D && ln_b.numel() == D, "layernorm parameters must have dim elements");
    TORCH_CHECK(w1.size(1) == D && b1.numel() == H && w2.size(0) == D && w2.size(1) == H && b2.numel() == D,
                "linear parameter shapes do not match");
    auto xn = torch::empty({T, D}, x.options());
    auto h = torch::empty({T, H}, x.options());
    auto w1t = torch::empty({D, H}, x.options());
    auto w2t = torch::empty({H, D}, x.options());
    auto out = torch::empty({T, D}, x.options());
    const float* __restrict__ xp = x.data_ptr<float>();
    const float* __restrict__ g = ln_w.data_ptr<float>();
    const float* __restrict__ be = ln_b.data_ptr<float>();
    float* __restrict__ xnp = xn.data_ptr<float>();
    const float e = static_cast<float>(eps);

    #pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; ++t) {
        const float* __restrict__ row = xp + t * D;
        float s = 0.0f;
        for (int64_t j = 0; j < D; ++j) s += row[j];
        const float mean = s / static_cast<float>(D);
        float v = 0.0f;
        for (int64_t j = 0; j < D; ++j) v += (row[j] - mean) * (row[j] - mean);
        const float rstd = 1.0f / std::sqrt(v / static_cast<float>(D) + e);
        for (int64_t j = 0; j < D; ++j) xnp[t * D + j] = (row[j] - mean) * rstd * g[j] + be[j];
    }
    transpose(w1.data_ptr<float>(), w1t.data_ptr<float>(), H, D);
    transpose(w2.data_ptr<float>(), w2t.data_ptr<float>(), D, H);
    gemm_bias(xnp, w1t.data_ptr<float>(), b1.data_ptr<float>(), nullptr, h.data_ptr<float>(), T, D, H, 0);
    gemm_bias(h.data_ptr<float>(), w2t.data_ptr<float>(), b2.data_ptr<float>(), xp, out.data_ptr<float>(), T, H, D, 1);
    return out;
}
"""

mlp_ext = load_inline(
    name="evalsvc_ex_l3_mlp_block_cpu_ok",
    cpp_sources=[cpp_source],
    functions=["mlp_block_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        # Same submodule names as the reference, so its state_dict loads; they only hold parameters.
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return mlp_ext.mlp_block_forward(
            x.contiguous(),
            self.norm.weight.contiguous(),
            self.norm.bias.contiguous(),
            self.norm.eps,
            self.fc1.weight.contiguous(),
            self.fc1.bias.contiguous(),
            self.fc2.weight.contiguous(),
            self.fc2.bias.contiguous(),
        )
