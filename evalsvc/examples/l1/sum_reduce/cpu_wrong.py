import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Deliberately wrong (expect: incorrect): an off-by-one in the reduction loop drops the last element
# of every reduced slice.
cpp_source = r"""
#include <torch/extension.h>
#include <vector>

// x viewed as (outer, reduce, inner) around `dim`; out[o, i] = sum_r x[o, r, i], returned with
// `dim` kept as size 1 (the same memory layout as (outer, inner)).
// Each task owns one (outer, column-chunk) pair and streams the rows of its slab in order,
// accumulating into the output row, which stays in L1.
static constexpr int64_t CHUNK = 1024;

torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.device().is_cpu(), "x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    const int64_t nd = x.dim();
    TORCH_CHECK(nd >= 1, "x must have at least one dimension");
    const int64_t d = dim < 0 ? dim + nd : dim;
    TORCH_CHECK(d >= 0 && d < nd, "dim out of range");
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < d; ++i) outer *= x.size(i);
    for (int64_t i = d + 1; i < nd; ++i) inner *= x.size(i);
    const int64_t reduce = x.size(d);
    std::vector<int64_t> out_sizes(x.sizes().begin(), x.sizes().end());
    out_sizes[d] = 1;  // keepdim
    auto out = torch::empty(out_sizes, x.options());
    const float* __restrict__ in = x.data_ptr<float>();
    float* __restrict__ o = out.data_ptr<float>();
    const int64_t chunks = (inner + CHUNK - 1) / CHUNK;
    #pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < outer * chunks; ++t) {
        const int64_t ob = t / chunks;
        const int64_t c0 = (t % chunks) * CHUNK;
        const int64_t w = inner - c0 < CHUNK ? inner - c0 : CHUNK;
        float* __restrict__ dst = o + ob * inner + c0;
        for (int64_t j = 0; j < w; ++j) dst[j] = 0.0f;
        const float* __restrict__ src = in + ob * reduce * inner + c0;
        for (int64_t r = 0; r < reduce - 1; ++r) {  // BUG: off by one, drops the last row
            const float* __restrict__ row = src + r * inner;
            for (int64_t j = 0; j < w; ++j) dst[j] += row[j];
        }
    }
    return out;
}
"""

sum_ext = load_inline(
    name="evalsvc_ex_l1_sum_reduce_cpu_wrong",
    cpp_sources=[cpp_source],
    functions=["sum_dim_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_ext.sum_dim_forward(x.contiguous(), self.dim)
