# Style: AI CUDA Engineer (Sakana) archive L2-normalisation entry: cooperative_groups warp tiles
# (cg::tiled_partition<32>, tile.shfl_down), a two-kernel design (row norms, then scale), x.size(-1).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

l2norm_source = r"""
#include <torch/extension.h>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

__global__ void row_sumsq_kernel(const float* __restrict__ x, float* __restrict__ norms, int rows, int cols) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= rows) return;
    float s = 0.f;
    for (int c = warp.thread_rank(); c < cols; c += 32) { float v = x[(size_t)row * cols + c]; s += v * v; }
    for (int off = 16; off > 0; off >>= 1) s += warp.shfl_down(s, off);
    if (warp.thread_rank() == 0) norms[row] = sqrtf(s) + 1e-12f;
}

__global__ void row_scale_kernel(const float* __restrict__ x, const float* __restrict__ norms, float* __restrict__ y, int rows, int cols) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < (size_t)rows * cols) y[i] = x[i] / norms[i / cols];
}

torch::Tensor l2_normalize(torch::Tensor x) {
    auto xc = x.contiguous();
    const int cols = xc.size(-1);
    const int rows = xc.numel() / cols;
    auto norms = torch::empty({rows}, xc.options());
    auto y = torch::empty_like(xc);
    const int threads = 256;
    row_sumsq_kernel<<<(rows + threads / 32 - 1) / (threads / 32), threads>>>(xc.data_ptr<float>(), norms.data_ptr<float>(), rows, cols);
    const size_t total = (size_t)rows * cols;
    row_scale_kernel<<<(total + threads - 1) / threads, threads>>>(xc.data_ptr<float>(), norms.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
"""

l2norm_cpp = "torch::Tensor l2_normalize(torch::Tensor x);"

l2norm = load_inline(
    name="styles_l2norm_cg",
    cpp_sources=l2norm_cpp,
    cuda_sources=l2norm_source,
    functions=["l2_normalize"],
    extra_cuda_cflags=["-O3", "--use_fast_math"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return l2norm.l2_normalize(x)
