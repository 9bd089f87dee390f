# Style: KernelBench level 1 generated sample "Mean over last dim": one warp per row with __shfl_down_sync,
# x.size(-1), x.view({-1, cols}) on the host, torch::empty({rows}, x.options()).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

mean_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define WARP_SIZE 32

__inline__ __device__ float warpReduceSum(float val) {
    for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2)
        val += __shfl_down_sync(0xffffffff, val, offset);
    return val;
}

// One warp per row; blockDim.x = 32 * rows_per_block
__global__ void mean_lastdim_kernel(const float* __restrict__ x, float* __restrict__ out, int rows, int cols) {
    int warp_id = (blockIdx.x * blockDim.x + threadIdx.x) / WARP_SIZE;
    int lane = threadIdx.x % WARP_SIZE;
    if (warp_id >= rows) return;
    const float* row = x + (size_t)warp_id * cols;
    float sum = 0.0f;
    for (int c = lane; c < cols; c += WARP_SIZE) sum += row[c];
    sum = warpReduceSum(sum);
    if (lane == 0) out[warp_id] = sum / cols;
}

torch::Tensor mean_lastdim_cuda(torch::Tensor x) {
    auto cols = x.size(-1);
    auto x2 = x.contiguous().view({-1, cols});
    auto rows = x2.size(0);
    auto out = torch::empty({rows}, x.options());

    const int threads = 256;
    const int rows_per_block = threads / WARP_SIZE;
    const int blocks = (rows + rows_per_block - 1) / rows_per_block;
    mean_lastdim_kernel<<<blocks, threads>>>(x2.data_ptr<float>(), out.data_ptr<float>(), rows, cols);

    std::vector<int64_t> out_shape(x.sizes().begin(), x.sizes().end() - 1);
    return out.view(out_shape);
}
"""

mean_cpp_source = "torch::Tensor mean_lastdim_cuda(torch::Tensor x);"

mean_lastdim = load_inline(
    name="styles_mean_lastdim",
    cpp_sources=mean_cpp_source,
    cuda_sources=mean_source,
    functions=["mean_lastdim_cuda"],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.dim not in (-1, x.dim() - 1):
            x = x.transpose(self.dim, -1)
        return mean_lastdim.mean_lastdim_cuda(x)
