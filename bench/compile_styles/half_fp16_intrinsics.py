# Style: Kevin-32B / KernelBench fp16 sample: cuda_fp16.h, data_ptr<at::Half>() reinterpret_cast to __half*,
# __half2 vector math with __hmul2/__hadd2 and __float2half (torch builds with __CUDA_NO_HALF_OPERATORS__).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

fp16_source = r"""
#include <torch/extension.h>
#include <cuda_fp16.h>

__global__ void axpby_half2_kernel(const __half2* __restrict__ x, const __half2* __restrict__ y, __half2* __restrict__ out,
                                   __half2 a, __half2 b, int n2) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n2) out[i] = __hadd2(__hmul2(a, x[i]), __hmul2(b, y[i]));
}

__global__ void axpby_half_tail_kernel(const __half* x, const __half* y, __half* out, __half a, __half b, int start, int n) {
    int i = start + blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __hadd(__hmul(a, x[i]), __hmul(b, y[i]));
}

torch::Tensor axpby_half(torch::Tensor x, torch::Tensor y, double a, double b) {
    TORCH_CHECK(x.scalar_type() == at::kHalf && y.scalar_type() == at::kHalf, "expected float16 inputs");
    auto out = torch::empty_like(x);
    const int n = x.numel();
    const int n2 = n / 2;
    const __half ha = __float2half((float)a), hb = __float2half((float)b);
    const int threads = 256;
    if (n2 > 0) {
        axpby_half2_kernel<<<(n2 + threads - 1) / threads, threads>>>(
            reinterpret_cast<const __half2*>(x.data_ptr<at::Half>()), reinterpret_cast<const __half2*>(y.data_ptr<at::Half>()),
            reinterpret_cast<__half2*>(out.data_ptr<at::Half>()), __halves2half2(ha, ha), __halves2half2(hb, hb), n2);
    }
    if (n % 2) {
        axpby_half_tail_kernel<<<1, 32>>>(reinterpret_cast<const __half*>(x.data_ptr<at::Half>()),
                                           reinterpret_cast<const __half*>(y.data_ptr<at::Half>()),
                                           reinterpret_cast<__half*>(out.data_ptr<at::Half>()), ha, hb, 2 * n2, n);
    }
    return out;
}
"""

fp16_cpp = "torch::Tensor axpby_half(torch::Tensor x, torch::Tensor y, double a, double b);"

axpby = load_inline(
    name="styles_axpby_half",
    cpp_sources=fp16_cpp,
    cuda_sources=fp16_source,
    functions=["axpby_half"],
    extra_cuda_cflags=["-O3", "--use_fast_math"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, a: float = 2.0, b: float = 0.5):
        super().__init__()
        self.a, self.b = a, b

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return axpby.axpby_half(x.half().contiguous(), y.half().contiguous(), self.a, self.b)
