# style: CUDA, two kernels (split-row partial sums into a workspace, then a grid-stride finishing pass)
# device: cuda
# task: l1/sum_reduce
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <vector>

// x viewed as (outer, reduce, inner). Stage 1: block (bx, o, split) sums rows [split * chunk, ...)
// of columns [bx * 256, ...) into part[split, o, :]. Stage 2 adds the splits in a fixed order.
__global__ void partial_sums(const float* __restrict__ x, float* __restrict__ part, int64_t outer,
                             int64_t reduce, int64_t inner, int64_t chunk) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int64_t o = blockIdx.y, split = blockIdx.z;
    if (i >= inner) return;
    const int64_t r0 = split * chunk;
    const int64_t r1 = r0 + chunk < reduce ? r0 + chunk : reduce;
    const float* src = x + (o * reduce + r0) * inner + i;
    float acc = 0.0f;
    for (int64_t r = r0; r < r1; ++r, src += inner) acc += *src;
    part[(split * outer + o) * inner + i] = acc;
}

__global__ void finish_sums(const float* __restrict__ part, float* __restrict__ out, int64_t n, int splits) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n; j += stride) {
        float acc = 0.0f;
        for (int s = 0; s < splits; ++s) acc += part[s * n + j];
        out[j] = acc;
    }
}

torch::Tensor sum_dim(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "float32 CUDA tensor expected");
    auto xc = x.contiguous();
    if (dim < 0) dim += xc.dim();
    TORCH_CHECK(dim >= 0 && dim < xc.dim(), "dim out of range");
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= xc.size(d);
    for (int64_t d = dim + 1; d < xc.dim(); ++d) inner *= xc.size(d);
    const int64_t reduce = xc.size(dim);
    TORCH_CHECK(outer <= 65535, "too many outer slices for the grid");
    std::vector<int64_t> shape = xc.sizes().vec();
    shape[dim] = 1;
    auto out = torch::empty(shape, xc.options());
    if (out.numel() == 0) return out;
    const int splits = reduce >= 2048 ? 16 : 1;
    const int64_t chunk = (reduce + splits - 1) / splits;
    auto part = torch::empty({splits, outer, inner}, xc.options());
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    dim3 grid((unsigned)((inner + 255) / 256), (unsigned)outer, (unsigned)splits);
    partial_sums<<<grid, 256, 0, stream>>>(xc.data_ptr<float>(), part.data_ptr<float>(), outer, reduce, inner, chunk);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    const int64_t n = outer * inner;
    const int blocks = (int)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
    finish_sums<<<blocks, 256, 0, stream>>>(part.data_ptr<float>(), out.data_ptr<float>(), n, splits);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = "torch::Tensor sum_dim(torch::Tensor x, int64_t dim);"

sum_ext = load_inline(
    name="evalsvc_honest_sum_reduce_cuda_two_kernels",
    cpp_sources=[cpp_source],
    cuda_sources=[cuda_source],
    functions=["sum_dim"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_ext.sum_dim(x, self.dim)
