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

__device__ __forceinline__ float gelu_tanh(float v) {
    const float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    return 0.5f * v * (1.0f + tanhf(u));
}

// One fused pass: out = gelu_tanh(x * scale[col] + y). float4 over rows whose width d is a
// multiple of 4, so the 4 lanes of a vector share one row and read one float4 of scale.
__global__ void scale_add_gelu_vec4(const float4* __restrict__ x, const float4* __restrict__ y,
                                    const float4* __restrict__ scale, float4* __restrict__ out,
                                    int64_t n4, int64_t d4) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        const float4 a = __ldg(x + i);
        const float4 b = __ldg(y + i);
        const float4 s = __ldg(scale + i % d4);
        float4 o;
        o.x = gelu_tanh(fmaf(a.x, s.x, b.x));
        o.y = gelu_tanh(fmaf(a.y, s.y, b.y));
        o.z = gelu_tanh(fmaf(a.z, s.z, b.z));
        o.w = gelu_tanh(fmaf(a.w, s.w, b.w));
        out[i] = o;
    }
}

__global__ void scale_add_gelu_scalar(const float* __restrict__ x, const float* __restrict__ y,
                                      const float* __restrict__ scale, float* __restrict__ out, int64_t n, int64_t d) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = gelu_tanh(fmaf(x[i], scale[i % d], y[i]));
}

torch::Tensor scale_add_gelu_forward(torch::Tensor x, torch::Tensor y, torch::Tensor scale) {
    TORCH_CHECK(x.is_cuda() && y.is_cuda() && scale.is_cuda(), "CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && y.scalar_type() == torch::kFloat32 &&
                scale.scalar_type() == torch::kFloat32, "float32 expected");
    TORCH_CHECK(x.is_contiguous() && y.is_contiguous() && scale.is_contiguous(), "contiguous tensors expected");
    TORCH_CHECK(x.sizes() == y.sizes(), "x and y must have the same shape");
    TORCH_CHECK(scale.dim() == 1 && x.dim() >= 1 && x.size(-1) == scale.size(0), "scale must match x's last dim");
    auto out = torch::empty_like(x);
    const int64_t n = x.numel();
    const int64_t d = scale.size(0);
    if (n == 0) return out;
    const float* xp = x.data_ptr<float>();
    const float* yp = y.data_ptr<float>();
    const float* sp = scale.data_ptr<float>();
    float* op = out.data_ptr<float>();
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const int threads = 256;
    const int64_t max_blocks = (int64_t)num_sms() * 2048;  // ~one float4 per thread; grid-stride past that
    auto al16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    if (d % 4 == 0 && al16(xp) && al16(yp) && al16(sp) && al16(op)) {
        const int64_t n4 = n / 4;
        int64_t blocks = (n4 + threads - 1) / threads;
        blocks = blocks > max_blocks ? max_blocks : blocks;
        scale_add_gelu_vec4<<<(unsigned)blocks, threads, 0, stream>>>(
            (const float4*)xp, (const float4*)yp, (const float4*)sp, (float4*)op, n4, d / 4);
    } else {
        int64_t blocks = (n + threads - 1) / threads;
        blocks = blocks > max_blocks ? max_blocks : blocks;
        scale_add_gelu_scalar<<<(unsigned)blocks, threads, 0, stream>>>(xp, yp, sp, op, n, d);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = "torch::Tensor scale_add_gelu_forward(torch::Tensor x, torch::Tensor y, torch::Tensor scale);"

fused_ext = load_inline(
    name="evalsvc_ex_l2_scale_add_gelu_cuda_ok",
    cpp_sources=[cpp_source],
    cuda_sources=[cuda_source],
    functions=["scale_add_gelu_forward"],
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(torch.empty(dim))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return fused_ext.scale_add_gelu_forward(x.contiguous(), y.contiguous(), self.scale.contiguous())
