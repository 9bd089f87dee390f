import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
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

__device__ __forceinline__ float relu1(float v) { return v < 0.0f ? 0.0f : v; }  // keeps NaN, like torch

// Grid-stride loop over float4 vectors; the n % 4 leftover scalars are done by the first threads.
__global__ void relu_vec4_kernel(const float4* __restrict__ in, float4* __restrict__ out, int64_t n4,
                                 const float* __restrict__ tail_in, float* __restrict__ tail_out, int tail) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i < n4; i += stride) {
        float4 v = __ldg(in + i);
        v.x = relu1(v.x); v.y = relu1(v.y); v.z = relu1(v.z); v.w = relu1(v.w);
        out[i] = v;
    }
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < tail) tail_out[t] = relu1(tail_in[t]);
}

// Fallback for storage that is not 16-byte aligned.
__global__ void relu_scalar_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = relu1(in[i]);
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    auto out = torch::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) return out;
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const int threads = 256;
    // One float4 per thread when the grid allows it (measured fastest on H200); the grid-stride loop
    // covers anything past the cap.
    const int64_t max_blocks = (int64_t)num_sms() * 2048;
    const bool aligned = (reinterpret_cast<uintptr_t>(in) % 16 == 0) && (reinterpret_cast<uintptr_t>(o) % 16 == 0);
    if (aligned) {
        const int64_t n4 = n / 4;
        const int tail = (int)(n - n4 * 4);
        int64_t blocks = (n4 + threads - 1) / threads;
        blocks = blocks < 1 ? 1 : (blocks > max_blocks ? max_blocks : blocks);
        relu_vec4_kernel<<<(unsigned)blocks, threads, 0, stream>>>(
            reinterpret_cast<const float4*>(in), reinterpret_cast<float4*>(o), n4, in + n4 * 4, o + n4 * 4, tail);
    } else {
        int64_t blocks = (n + threads - 1) / threads;
        blocks = blocks > max_blocks ? max_blocks : blocks;
        relu_scalar_kernel<<<(unsigned)blocks, threads, 0, stream>>>(in, o, n);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = "torch::Tensor relu_forward(torch::Tensor x);"

relu_ext = load_inline(
    name="evalsvc_ex_l1_relu_cuda_ok",
    cpp_sources=[cpp_source],
    cuda_sources=[cuda_source],
    functions=["relu_forward"],
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_forward(x.contiguous())
