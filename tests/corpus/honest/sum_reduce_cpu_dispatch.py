# style: CPU C++, templated kernel under AT_DISPATCH_FLOATING_TYPES, outer/reduce/inner decomposition
# device: cpu
# task: l1/sum_reduce
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <vector>

// x viewed as (outer, reduce, inner): out[o, i] = sum_r x[o, r, i]. Each task owns one (o, inner block)
// and streams the reduced rows through a small accumulator.
template <typename scalar_t>
static void sum_middle(const scalar_t* in, scalar_t* out, int64_t outer, int64_t reduce, int64_t inner) {
    constexpr int64_t IB = 256;
    const int64_t blocks = (inner + IB - 1) / IB;
    #pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < outer * blocks; ++t) {
        const int64_t o = t / blocks, i0 = (t % blocks) * IB;
        const int64_t w = inner - i0 < IB ? inner - i0 : IB;
        scalar_t acc[IB];
        for (int64_t j = 0; j < w; ++j) acc[j] = 0;
        const scalar_t* src = in + o * reduce * inner + i0;
        for (int64_t r = 0; r < reduce; ++r, src += inner)
            for (int64_t j = 0; j < w; ++j) acc[j] += src[j];
        scalar_t* dst = out + o * inner + i0;
        for (int64_t j = 0; j < w; ++j) dst[j] = acc[j];
    }
}

torch::Tensor sum_dim(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.device().is_cpu(), "CPU tensor expected");
    x = x.contiguous();
    if (dim < 0) dim += x.dim();
    TORCH_CHECK(dim >= 0 && dim < x.dim(), "dim out of range");
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
    for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
    const int64_t reduce = x.size(dim);
    std::vector<int64_t> shape = x.sizes().vec();
    shape[dim] = 1;
    auto out = torch::empty(shape, x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "sum_dim", [&] {
        sum_middle<scalar_t>(x.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), outer, reduce, inner);
    });
    return out;
}
"""

sum_ext = load_inline(
    name="evalsvc_honest_sum_reduce_cpu_dispatch",
    cpp_sources=[cpp_source],
    functions=["sum_dim"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_ext.sum_dim(x, self.dim)
