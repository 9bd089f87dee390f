# Style: KernelBench level 1 generated sample "Sum reduction over a dimension": an int dim argument, the
# output shape built from x.sizes() into a std::vector<int64_t>, outer/inner strides computed on the host.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

sum_reduce_source = """
#include <torch/extension.h>
#include <vector>

__global__ void sum_reduce_kernel(const float* input, float* output, int outer, int reduce, int inner) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= outer * inner) return;
    int o = idx / inner;
    int i = idx % inner;
    const float* base = input + (int64_t)o * reduce * inner + i;
    float acc = 0.0f;
    for (int r = 0; r < reduce; ++r) {
        acc += base[(int64_t)r * inner];
    }
    output[idx] = acc;
}

torch::Tensor sum_reduce_cuda(torch::Tensor input, int dim) {
    if (dim < 0) dim += input.dim();
    auto sizes = input.sizes();
    int outer = 1, inner = 1;
    for (int d = 0; d < dim; ++d) outer *= sizes[d];
    for (int d = dim + 1; d < input.dim(); ++d) inner *= sizes[d];
    int reduce = sizes[dim];

    std::vector<int64_t> out_sizes(sizes.begin(), sizes.end());
    out_sizes[dim] = 1;  // keepdim=True like the reference
    auto output = torch::empty(out_sizes, input.options());

    const int threads = 256;
    const int blocks = (outer * inner + threads - 1) / threads;
    sum_reduce_kernel<<<blocks, threads>>>(input.data_ptr<float>(), output.data_ptr<float>(), outer, reduce, inner);
    return output;
}
"""

sum_reduce_cpp_source = "torch::Tensor sum_reduce_cuda(torch::Tensor input, int dim);"

sum_reduce = load_inline(
    name="styles_sum_reduce_dim",
    cpp_sources=sum_reduce_cpp_source,
    cuda_sources=sum_reduce_source,
    functions=["sum_reduce_cuda"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim
        self.sum_reduce = sum_reduce

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.sum_reduce.sum_reduce_cuda(x.contiguous(), self.dim)
