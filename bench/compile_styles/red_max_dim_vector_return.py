# Style: KernelBench level 1 generated sample "torch.max over a dim" returning values and indices as a
# std::vector<torch::Tensor>; indices allocated with torch::TensorOptions().dtype(torch::kLong).device(...).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

max_dim_source = """
#include <torch/extension.h>
#include <vector>
#include <cfloat>

__global__ void max_dim_kernel(const float* x, float* values, int64_t* indices, int outer, int reduce, int inner) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= outer * inner) return;
    int o = idx / inner, i = idx % inner;
    const float* p = x + (int64_t)o * reduce * inner + i;
    float best = -FLT_MAX;
    int64_t best_i = 0;
    for (int r = 0; r < reduce; ++r) {
        float v = p[(int64_t)r * inner];
        if (v > best) { best = v; best_i = r; }
    }
    values[idx] = best;
    indices[idx] = best_i;
}

std::vector<torch::Tensor> max_dim_cuda(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda(), "x must be CUDA");
    x = x.contiguous();
    if (dim < 0) dim += x.dim();
    int outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
    for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
    int reduce = x.size(dim);

    std::vector<int64_t> out_shape;
    for (int64_t d = 0; d < x.dim(); ++d) if (d != dim) out_shape.push_back(x.size(d));
    auto values = torch::empty(out_shape, x.options());
    auto indices = torch::empty(out_shape, torch::TensorOptions().dtype(torch::kLong).device(x.device()));

    int total = outer * inner;
    int threads = 256;
    int blocks = (total + threads - 1) / threads;
    max_dim_kernel<<<blocks, threads>>>(x.data_ptr<float>(), values.data_ptr<float>(), indices.data_ptr<int64_t>(),
                                        outer, reduce, inner);
    return {values, indices};
}
"""

max_dim_cpp = "std::vector<torch::Tensor> max_dim_cuda(torch::Tensor x, int64_t dim);"

max_dim = load_inline(
    name="styles_max_dim",
    cpp_sources=max_dim_cpp,
    cuda_sources=max_dim_source,
    functions=["max_dim_cuda"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        values, _ = max_dim.max_dim_cuda(x, self.dim)
        return values
