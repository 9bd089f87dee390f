# Style: Kevin-32B / KernelBench level 1 softmax sample: one block per row, warp reductions with
# __shfl_down_sync and a shared array of per-warp partials, dynamic shared memory sized on the host.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

softmax_cuda_source = r"""
#include <torch/extension.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <float.h>

__device__ float warp_reduce_max(float val) {
    for (int offset = 16; offset > 0; offset /= 2)
        val = fmaxf(val, __shfl_down_sync(0xffffffff, val, offset));
    return val;
}

__device__ float warp_reduce_sum(float val) {
    for (int offset = 16; offset > 0; offset /= 2)
        val += __shfl_down_sync(0xffffffff, val, offset);
    return val;
}

__global__ void softmax_kernel(const float* __restrict__ input, float* __restrict__ output, int num_cols) {
    extern __shared__ float shared[];
    int row = blockIdx.x;
    int tid = threadIdx.x;
    int lane = tid % 32;
    int warp = tid / 32;
    int num_warps = blockDim.x / 32;
    const float* in_row = input + (size_t)row * num_cols;
    float* out_row = output + (size_t)row * num_cols;

    float local_max = -FLT_MAX;
    for (int i = tid; i < num_cols; i += blockDim.x) local_max = fmaxf(local_max, in_row[i]);
    local_max = warp_reduce_max(local_max);
    if (lane == 0) shared[warp] = local_max;
    __syncthreads();
    if (warp == 0) {
        float v = lane < num_warps ? shared[lane] : -FLT_MAX;
        v = warp_reduce_max(v);
        if (lane == 0) shared[0] = v;
    }
    __syncthreads();
    float row_max = shared[0];
    __syncthreads();

    float local_sum = 0.0f;
    for (int i = tid; i < num_cols; i += blockDim.x) local_sum += __expf(in_row[i] - row_max);
    local_sum = warp_reduce_sum(local_sum);
    if (lane == 0) shared[warp] = local_sum;
    __syncthreads();
    if (warp == 0) {
        float v = lane < num_warps ? shared[lane] : 0.0f;
        v = warp_reduce_sum(v);
        if (lane == 0) shared[0] = v;
    }
    __syncthreads();
    float inv_sum = 1.0f / shared[0];

    for (int i = tid; i < num_cols; i += blockDim.x) out_row[i] = __expf(in_row[i] - row_max) * inv_sum;
}

torch::Tensor softmax_cuda(torch::Tensor input) {
    TORCH_CHECK(input.dim() == 2, "Input must be 2D");
    auto output = torch::empty_like(input);
    int batch_size = input.size(0);
    int num_cols = input.size(1);
    const int threads = 256;
    size_t shared_mem = (threads / 32) * sizeof(float);
    softmax_kernel<<<batch_size, threads, shared_mem>>>(input.data_ptr<float>(), output.data_ptr<float>(), num_cols);
    return output;
}
"""

softmax_cpp_source = "torch::Tensor softmax_cuda(torch::Tensor input);"

softmax_module = load_inline(
    name="styles_softmax_shfl_down",
    cpp_sources=softmax_cpp_source,
    cuda_sources=softmax_cuda_source,
    functions=["softmax_cuda"],
    verbose=True,
    extra_cuda_cflags=["-O3", "--use_fast_math"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.softmax = softmax_module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.softmax.softmax_cuda(x.contiguous())
