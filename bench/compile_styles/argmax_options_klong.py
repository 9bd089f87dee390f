# Style: KernelBench level 1 "argmin/argmax over a dim" generated sample: the index output allocated with
# x.options().dtype(torch::kLong), the reduced shape built by erasing one entry of x.sizes().vec().
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

argmax_source = """
#include <torch/extension.h>
#include <vector>

__global__ void argmax_kernel(const float* __restrict__ x, int64_t* __restrict__ out, int outer, int dim_size, int inner) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= outer * inner) return;
    int o = idx / inner, i = idx % inner;
    const float* p = x + (size_t)o * dim_size * inner + i;
    int best = 0;
    float best_v = p[0];
    for (int d = 1; d < dim_size; ++d) {
        float v = p[(size_t)d * inner];
        if (v > best_v) { best_v = v; best = d; }
    }
    out[idx] = best;
}

torch::Tensor argmax_cuda(torch::Tensor x, int dim) {
    x = x.contiguous();
    const int ndim = x.dim();
    if (dim < 0) dim += ndim;
    auto shape = x.sizes().vec();
    int outer = 1, inner = 1;
    for (int d = 0; d < dim; ++d) outer *= shape[d];
    for (int d = dim + 1; d < ndim; ++d) inner *= shape[d];
    const int dim_size = shape[dim];
    shape.erase(shape.begin() + dim);
    auto out = torch::empty(shape, x.options().dtype(torch::kLong));
    const int threads = 256;
    argmax_kernel<<<(outer * inner + threads - 1) / threads, threads>>>(x.data_ptr<float>(), out.data_ptr<int64_t>(), outer, dim_size, inner);
    return out;
}
"""

argmax_cpp_source = "torch::Tensor argmax_cuda(torch::Tensor x, int dim);"

argmax = load_inline(
    name="styles_argmax",
    cpp_sources=argmax_cpp_source,
    cuda_sources=argmax_source,
    functions=["argmax_cuda"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim
        self.argmax = argmax

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.argmax.argmax_cuda(x, self.dim)
