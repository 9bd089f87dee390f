import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Deliberately broken (expect: compile_error): the kernel takes plain float pointers but reads and
# writes them as float4, and there is no conversion between float and float4, so nvcc rejects it.
cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

__global__ void relu_vec4_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t n4) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = in[i];
        v.x = fmaxf(v.x, 0.0f); v.y = fmaxf(v.y, 0.0f); v.z = fmaxf(v.z, 0.0f); v.w = fmaxf(v.w, 0.0f);
        out[i] = v;
    }
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.numel() % 4 == 0, "bad input");
    auto out = torch::empty_like(x);
    const int64_t n4 = x.numel() / 4;
    const int threads = 256;
    const int blocks = (int)((n4 + threads - 1) / threads);
    relu_vec4_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), out.data_ptr<float>(), n4);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = "torch::Tensor relu_forward(torch::Tensor x);"

relu_ext = load_inline(
    name="evalsvc_ex_l1_relu_cuda_compile_error",
    cpp_sources=[cpp_source],
    cuda_sources=[cuda_source],
    functions=["relu_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_forward(x.contiguous())
