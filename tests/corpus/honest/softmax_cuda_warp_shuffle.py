# style: CUDA, one warp per row, online softmax per lane merged with __shfl_xor_sync, no shared memory
# device: cuda
# task: l1/softmax
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <cmath>

// Merge two (max, sum of exp(v - max)) pairs.
__device__ __forceinline__ void merge(float& m, float& s, float om, float os) {
    const float nm = fmaxf(m, om);
    const float a = m == -INFINITY ? 0.0f : s * expf(m - nm);
    const float b = om == -INFINITY ? 0.0f : os * expf(om - nm);
    m = nm;
    s = a + b;
}

__global__ void softmax_warp_rows(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    const int row = (int)((blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32);
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;  // the whole warp leaves together
    const float* xr = x + (int64_t)row * cols;
    float* yr = y + (int64_t)row * cols;
    float m = -INFINITY, s = 0.0f;
    for (int c = lane; c < cols; c += 32) {
        const float v = xr[c];
        if (v > m) {
            s = s * expf(m - v) + 1.0f;
            m = v;
        } else {
            s += expf(v - m);
        }
    }
    #pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float om = __shfl_xor_sync(0xffffffffu, m, off);
        const float os = __shfl_xor_sync(0xffffffffu, s, off);
        merge(m, s, om, os);
    }
    const float inv = 1.0f / s;
    for (int c = lane; c < cols; c += 32) yr[c] = expf(xr[c] - m) * inv;
}

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "float32 CUDA tensor expected");
    TORCH_CHECK(x.dim() == 2 && x.is_contiguous(), "contiguous 2-D input expected");
    TORCH_CHECK(x.size(0) < (1LL << 31) && x.size(1) < (1LL << 31), "too large");
    const int rows = (int)x.size(0), cols = (int)x.size(1);
    auto y = torch::empty_like(x);
    if (rows == 0 || cols == 0) return y;
    const int threads = 256, rows_per_block = threads / 32;
    const int blocks = (rows + rows_per_block - 1) / rows_per_block;
    softmax_warp_rows<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor softmax_forward(torch::Tensor x);"

softmax_ext = load_inline(
    name="evalsvc_honest_softmax_cuda_warp_shuffle",
    cpp_sources=[cpp_source],
    cuda_sources=[cuda_source],
    functions=["softmax_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_ext.softmax_forward(x.contiguous())
