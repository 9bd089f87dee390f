# Style: AI CUDA Engineer / Kevin vectorised elementwise: float4 loads through reinterpret_cast with a scalar
# tail, __ldg, alignment check on data_ptr, ReLU6.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

relu6_source = r"""
#include <torch/extension.h>
#include <cstdint>

__global__ void relu6_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ y, int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = __ldg(&x[i]);
        v.x = fminf(fmaxf(v.x, 0.f), 6.f);
        v.y = fminf(fmaxf(v.y, 0.f), 6.f);
        v.z = fminf(fmaxf(v.z, 0.f), 6.f);
        v.w = fminf(fmaxf(v.w, 0.f), 6.f);
        y[i] = v;
    }
}

__global__ void relu6_tail_kernel(const float* __restrict__ x, float* __restrict__ y, int start, int n) {
    int i = start + blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fminf(fmaxf(x[i], 0.f), 6.f);
}

torch::Tensor relu6_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    auto y = torch::empty_like(x);
    const int n = x.numel();
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const bool aligned = (reinterpret_cast<std::uintptr_t>(xp) % 16 == 0) && (reinterpret_cast<std::uintptr_t>(yp) % 16 == 0);
    const int n4 = aligned ? n / 4 : 0;
    const int threads = 256;
    if (n4 > 0) {
        relu6_vec4_kernel<<<(n4 + threads - 1) / threads, threads>>>(reinterpret_cast<const float4*>(xp),
                                                                    reinterpret_cast<float4*>(yp), n4);
    }
    const int rest = n - 4 * n4;
    if (rest > 0) relu6_tail_kernel<<<(rest + threads - 1) / threads, threads>>>(xp, yp, 4 * n4, n);
    return y;
}
"""

relu6_cpp = "torch::Tensor relu6_forward(torch::Tensor x);"

relu6 = load_inline(
    name="styles_relu6_float4",
    cpp_sources=relu6_cpp,
    cuda_sources=relu6_source,
    functions=["relu6_forward"],
    extra_cuda_cflags=["-O3", "--use_fast_math"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu6.relu6_forward(x.contiguous())
