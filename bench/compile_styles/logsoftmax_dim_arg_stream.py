# Style: AI CUDA Engineer (Sakana) archive style for LogSoftmax: templated block size, a dim argument that
# is checked with TORCH_CHECK, the kernel launched on at::cuda::getCurrentCUDAStream().
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

log_softmax_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <cfloat>

template <int BLOCK_SIZE>
__global__ void log_softmax_forward_kernel(const float* __restrict__ input, float* __restrict__ output, const int dim_size) {
    __shared__ float sdata[BLOCK_SIZE];
    const int batch_idx = blockIdx.x;
    const float* in = input + (size_t)batch_idx * dim_size;
    float* out = output + (size_t)batch_idx * dim_size;

    float thread_max = -FLT_MAX;
    for (int i = threadIdx.x; i < dim_size; i += BLOCK_SIZE) thread_max = fmaxf(thread_max, in[i]);
    sdata[threadIdx.x] = thread_max;
    __syncthreads();
    for (int s = BLOCK_SIZE / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sdata[threadIdx.x] = fmaxf(sdata[threadIdx.x], sdata[threadIdx.x + s]);
        __syncthreads();
    }
    const float max_val = sdata[0];
    __syncthreads();

    float thread_sum = 0.0f;
    for (int i = threadIdx.x; i < dim_size; i += BLOCK_SIZE) thread_sum += expf(in[i] - max_val);
    sdata[threadIdx.x] = thread_sum;
    __syncthreads();
    for (int s = BLOCK_SIZE / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sdata[threadIdx.x] += sdata[threadIdx.x + s];
        __syncthreads();
    }
    const float log_sum = logf(sdata[0]);

    for (int i = threadIdx.x; i < dim_size; i += BLOCK_SIZE) out[i] = in[i] - max_val - log_sum;
}

torch::Tensor log_softmax_cuda_forward(torch::Tensor input, int64_t dim) {
    TORCH_CHECK(input.is_cuda(), "input must be a CUDA tensor");
    TORCH_CHECK(input.scalar_type() == at::ScalarType::Float, "only float32 is supported");
    int64_t ndim = input.dim();
    TORCH_CHECK(dim >= -ndim && dim < ndim, "dim out of range");
    dim = dim >= 0 ? dim : dim + ndim;
    TORCH_CHECK(dim == ndim - 1, "this kernel handles the last dim only");

    auto x = input.contiguous();
    const int dim_size = x.size(-1);
    const int batch = x.numel() / dim_size;
    auto output = torch::empty_like(x);

    constexpr int BLOCK = 256;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    log_softmax_forward_kernel<BLOCK><<<batch, BLOCK, 0, stream>>>(x.data_ptr<float>(), output.data_ptr<float>(), dim_size);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "log_softmax kernel failed: ", cudaGetErrorString(err));
    return output;
}
"""

log_softmax_cpp = "torch::Tensor log_softmax_cuda_forward(torch::Tensor input, int64_t dim);"

log_softmax_ext = load_inline(
    name="styles_log_softmax",
    cpp_sources=log_softmax_cpp,
    cuda_sources=log_softmax_source,
    functions=["log_softmax_cuda_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return log_softmax_ext.log_softmax_cuda_forward(x, self.dim)
