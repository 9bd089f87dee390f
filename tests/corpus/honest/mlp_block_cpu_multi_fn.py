# style: CPU C++, three exported functions (LayerNorm, Linear+GELU, Linear+residual) chained from forward via a helper method
# device: cpu
# task: l3/mlp_block
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>
#include <vector>

static void check2d(const torch::Tensor& t, const char* what) {
    TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == torch::kFloat32 && t.is_contiguous(), what,
                " must be a contiguous float32 CPU tensor");
}

torch::Tensor layer_norm(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, double eps) {
    check2d(x, "x");
    const int64_t T = x.size(0), D = x.size(1);
    auto y = torch::empty_like(x);
    const float* xp = x.data_ptr<float>();
    const float* g = gamma.data_ptr<float>();
    const float* bt = beta.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; ++t) {
        const float* row = xp + t * D;
        double mean = 0.0, sq = 0.0;
        for (int64_t d = 0; d < D; ++d) mean += row[d];
        mean /= D;
        for (int64_t d = 0; d < D; ++d) sq += (row[d] - mean) * (row[d] - mean);
        const float rstd = (float)(1.0 / std::sqrt(sq / D + eps));
        for (int64_t d = 0; d < D; ++d) yp[t * D + d] = ((float)(row[d] - mean)) * rstd * g[d] + bt[d];
    }
    return y;
}

// y = x @ w^T + b (then GELU when gelu != 0, then + res when res is given).
static torch::Tensor linear_impl(torch::Tensor x, torch::Tensor w, torch::Tensor b, int gelu, const float* res) {
    check2d(x, "x");
    check2d(w, "weight");
    TORCH_CHECK(x.size(1) == w.size(1) && b.size(0) == w.size(0), "shape mismatch");
    const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
    const float* xp = x.data_ptr<float>();
    const float* wp = w.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    std::vector<float> wt(K * N);
    for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) wt[k * N + n] = wp[n * K + k];
    auto y = torch::empty({M, N}, x.options());
    float* yp = y.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < M; ++i) {
        float* row = yp + i * N;
        for (int64_t j = 0; j < N; ++j) row[j] = bp[j];
        for (int64_t k = 0; k < K; ++k) {
            const float a = xp[i * K + k];
            const float* wr = wt.data() + k * N;
            for (int64_t j = 0; j < N; ++j) row[j] += a * wr[j];
        }
        if (gelu)
            for (int64_t j = 0; j < N; ++j) row[j] = 0.5f * row[j] * (1.0f + std::erf(row[j] * 0.70710678118654752f));
        if (res)
            for (int64_t j = 0; j < N; ++j) row[j] += res[i * N + j];
    }
    return y;
}

torch::Tensor linear_act(torch::Tensor x, torch::Tensor w, torch::Tensor b, int64_t gelu) {
    return linear_impl(x, w, b, (int)gelu, nullptr);
}

torch::Tensor linear_residual(torch::Tensor x, torch::Tensor w, torch::Tensor b, torch::Tensor res) {
    check2d(res, "residual");
    TORCH_CHECK(res.size(0) == x.size(0) && res.size(1) == w.size(0), "residual shape mismatch");
    return linear_impl(x, w, b, 0, res.data_ptr<float>());
}
"""

_mlp = load_inline(
    name="evalsvc_honest_mlp_block_cpu_multi_fn",
    cpp_sources=[cpp_source],
    functions=["layer_norm", "linear_act", "linear_residual"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def _project(self, h: torch.Tensor, layer: nn.Linear, gelu: bool) -> torch.Tensor:
        return _mlp.linear_act(h, layer.weight.contiguous(), layer.bias.contiguous(), 1 if gelu else 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        h = _mlp.layer_norm(x, self.norm.weight.contiguous(), self.norm.bias.contiguous(), float(self.norm.eps))
        h = self._project(h, self.fc1, gelu=True)
        return _mlp.linear_residual(h, self.fc2.weight.contiguous(), self.fc2.bias.contiguous(), x)
