import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Deliberately wrong (expect: incorrect): the second stage starts its loop over the partial sums at
# 1, so the rows of the first split never reach the output. For 16 x 16384 x 1024 (task_cuda.py; the count
# does not depend on the reduced extent) the host code uses ceil(4 * SMs / 128) splits, i.e. several on any GPU with more than 32 SMs (5 on an H200), and about
# 1/splits of every sum is missing. (With a single split stage 2 is skipped and the result is right.)
cuda_source = r"""
#include <torch/extension.h>
#include <vector>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <cstdint>

// Number of SMs of the current device (sizes the grids).
static int num_sms() {
    int dev = 0, sms = 0;
    C10_CUDA_CHECK(cudaGetDevice(&dev));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    return sms;
}

// x viewed as (outer, reduce, inner) around `dim`; out[o, i] = sum_r x[o, r, i], returned with
// `dim` kept as size 1 (the same memory layout as (outer, inner)).
// Stage 1: block (32, 8) owns 32 column-vectors of one outer slice and one of `splits` row ranges;
// threadIdx.y strides over the rows, then the 8 partial sums are combined in shared memory.
// Stage 2 (splits > 1): adds the `splits` partial results in a fixed order (deterministic).
constexpr int BX = 32;
constexpr int BY = 8;

template <int V>  // V = 4: float4 columns, V = 1: scalar columns
__global__ void __launch_bounds__(BX * BY) sum_partial_kernel(const float* __restrict__ x, float* __restrict__ part,
                                                              int64_t outer, int64_t reduce, int64_t inner,
                                                              int64_t rows_per_split) {
    __shared__ float sm[BY][BX * V + (V == 4 ? 4 : 1)];
    const int64_t col = ((int64_t)blockIdx.x * BX + threadIdx.x) * V;
    const int64_t ob = blockIdx.y;
    const int64_t split = blockIdx.z;
    const int64_t r0 = split * rows_per_split;
    const int64_t r1 = r0 + rows_per_split < reduce ? r0 + rows_per_split : reduce;
    float acc[V];
    #pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = 0.0f;
    if (col < inner) {
        const float* base = x + (ob * reduce) * inner + col;
        int64_t r = r0 + threadIdx.y;
        if constexpr (V == 4) {
            // 4 independent loads in flight per thread
            for (; r + 3 * BY < r1; r += 4 * BY) {
                float4 a = __ldg(reinterpret_cast<const float4*>(base + r * inner));
                float4 b = __ldg(reinterpret_cast<const float4*>(base + (r + BY) * inner));
                float4 c = __ldg(reinterpret_cast<const float4*>(base + (r + 2 * BY) * inner));
                float4 d = __ldg(reinterpret_cast<const float4*>(base + (r + 3 * BY) * inner));
                acc[0] += (a.x + b.x) + (c.x + d.x);
                acc[1] += (a.y + b.y) + (c.y + d.y);
                acc[2] += (a.z + b.z) + (c.z + d.z);
                acc[3] += (a.w + b.w) + (c.w + d.w);
            }
            for (; r < r1; r += BY) {
                float4 a = __ldg(reinterpret_cast<const float4*>(base + r * inner));
                acc[0] += a.x; acc[1] += a.y; acc[2] += a.z; acc[3] += a.w;
            }
        } else {
            for (; r < r1; r += BY) acc[0] += __ldg(base + r * inner);
        }
    }
    #pragma unroll
    for (int v = 0; v < V; ++v) sm[threadIdx.y][threadIdx.x * V + v] = acc[v];
    __syncthreads();
    // BX*V columns, summed over BY rows by the first BX*V threads
    const int t = threadIdx.y * BX + threadIdx.x;
    if (t < BX * V) {
        float s = 0.0f;
        #pragma unroll
        for (int y = 0; y < BY; ++y) s += sm[y][t];
        const int64_t c = (int64_t)blockIdx.x * BX * V + t;
        if (c < inner) part[(split * outer + ob) * inner + c] = s;
    }
}

__global__ void sum_splits_kernel(const float* __restrict__ part, float* __restrict__ out, int64_t n, int splits) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float s = 0.0f;
        for (int k = 1; k < splits; ++k) s += part[(int64_t)k * n + i];  // BUG: skips split 0
        out[i] = s;
    }
}

torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
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
    TORCH_CHECK(outer <= 65535, "outer extent too large for this kernel");
    auto out = torch::empty(out_sizes, x.options());
    if (outer * inner == 0) return out;
    const float* xp = x.data_ptr<float>();
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const int sms = num_sms();

    const bool vec = inner % 4 == 0 && reinterpret_cast<uintptr_t>(xp) % 16 == 0;
    const int64_t cols_per_block = (int64_t)BX * (vec ? 4 : 1);
    const int64_t gx = (inner + cols_per_block - 1) / cols_per_block;
    // enough blocks to fill the GPU ~4 times over, but at least 64 rows per split
    int64_t splits = (4LL * sms + gx * outer - 1) / (gx * outer);
    const int64_t max_splits = reduce / 64 > 1 ? reduce / 64 : 1;
    splits = splits < 1 ? 1 : (splits > max_splits ? max_splits : splits);
    splits = splits > 65535 ? 65535 : splits;
    const int64_t rows_per_split = (reduce + splits - 1) / splits;

    torch::Tensor part = splits == 1 ? out : torch::empty({splits, outer, inner}, x.options());
    const dim3 grid((unsigned)gx, (unsigned)outer, (unsigned)splits);
    const dim3 block(BX, BY);
    if (vec) {
        sum_partial_kernel<4><<<grid, block, 0, stream>>>(xp, part.data_ptr<float>(), outer, reduce, inner, rows_per_split);
    } else {
        sum_partial_kernel<1><<<grid, block, 0, stream>>>(xp, part.data_ptr<float>(), outer, reduce, inner, rows_per_split);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    if (splits > 1) {
        const int64_t n = outer * inner;
        int64_t blocks = (n + 255) / 256;
        blocks = blocks > (int64_t)sms * 8 ? (int64_t)sms * 8 : blocks;
        sum_splits_kernel<<<(unsigned)blocks, 256, 0, stream>>>(part.data_ptr<float>(), out.data_ptr<float>(), n, (int)splits);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}
"""

cpp_source = "torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim);"

sum_ext = load_inline(
    name="evalsvc_ex_l1_sum_reduce_cuda_wrong",
    cpp_sources=[cpp_source],
    cuda_sources=[cuda_source],
    functions=["sum_dim_forward"],
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_ext.sum_dim_forward(x.contiguous(), self.dim)
