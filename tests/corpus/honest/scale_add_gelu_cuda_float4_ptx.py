# style: CUDA, float4 vectorized loads/stores, inline PTX (tanh.approx.f32) in a device helper, grid-stride
# device: cuda
# task: l2/scale_add_gelu
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <cstdint>

__device__ __forceinline__ float tanh_fast(float v) {
    float r;
    asm("tanh.approx.f32 %0, %1;" : "=f"(r) : "f"(v));  // sm_75+, max relative error about 2^-11
    return r;
}

__device__ __forceinline__ float gelu_tanh(float v) {
    return 0.5f * v * (1.0f + tanh_fast(0.7978845608028654f * (v + 0.044715f * v * v * v)));
}

__global__ void scale_add_gelu_vec4(const float4* __restrict__ x, const float4* __restrict__ y,
                                    const float4* __restrict__ scale, float4* __restrict__ out,
                                    int64_t n4, int64_t cols4) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        const float4 a = x[i];
        const float4 b = y[i];
        const float4 s = __ldg(scale + i % cols4);
        float4 r;
        r.x = gelu_tanh(a.x * s.x + b.x);
        r.y = gelu_tanh(a.y * s.y + b.y);
        r.z = gelu_tanh(a.z * s.z + b.z);
        r.w = gelu_tanh(a.w * s.w + b.w);
        out[i] = r;
    }
}

torch::Tensor scale_add_gelu_forward(torch::Tensor x, torch::Tensor y, torch::Tensor scale) {
    TORCH_CHECK(x.is_cuda() && y.is_cuda() && scale.is_cuda(), "CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && y.scalar_type() == torch::kFloat32 &&
                scale.scalar_type() == torch::kFloat32, "float32 expected");
    TORCH_CHECK(x.is_contiguous() && y.is_contiguous() && scale.is_contiguous(), "contiguous tensors expected");
    TORCH_CHECK(x.sizes() == y.sizes() && x.size(-1) == scale.size(0), "shape mismatch");
    const int64_t cols = scale.size(0);
    TORCH_CHECK(cols % 4 == 0, "the last dimension must be a multiple of 4");
    auto out = torch::empty_like(x);
    const int64_t n4 = x.numel() / 4;
    if (n4 == 0) return out;
    const uintptr_t bits = reinterpret_cast<uintptr_t>(x.data_ptr<float>()) | reinterpret_cast<uintptr_t>(y.data_ptr<float>()) |
                           reinterpret_cast<uintptr_t>(scale.data_ptr<float>()) | reinterpret_cast<uintptr_t>(out.data_ptr<float>());
    TORCH_CHECK(bits % 16 == 0, "16-byte aligned storage expected");
    const int threads = 256;
    const int blocks = (int)((n4 + threads - 1) / threads < 16384 ? (n4 + threads - 1) / threads : 16384);
    scale_add_gelu_vec4<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<const float4*>(x.data_ptr<float>()), reinterpret_cast<const float4*>(y.data_ptr<float>()),
        reinterpret_cast<const float4*>(scale.data_ptr<float>()), reinterpret_cast<float4*>(out.data_ptr<float>()),
        n4, cols / 4);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = "torch::Tensor scale_add_gelu_forward(torch::Tensor x, torch::Tensor y, torch::Tensor scale);"

fused_ext = load_inline(
    name="evalsvc_honest_scale_add_gelu_cuda_float4_ptx",
    cpp_sources=[cpp_source],
    cuda_sources=[cuda_source],
    functions=["scale_add_gelu_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(torch.empty(dim))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return fused_ext.scale_add_gelu_forward(x.contiguous(), y.contiguous(), self.scale.contiguous())
