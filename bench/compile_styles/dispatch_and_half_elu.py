# Style: KernelBench level 1 ELU generated sample that dispatches with
# AT_DISPATCH_FLOATING_TYPES_AND_HALF(x.scalar_type(), "elu_cuda", ([&] { ... })) and a float alpha.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

elu_source = """
#include <torch/extension.h>
#include <cuda_fp16.h>

template <typename scalar_t>
__global__ void elu_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, float alpha, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) {
        float v = static_cast<float>(x[i]);
        y[i] = static_cast<scalar_t>(v > 0.f ? v : alpha * (expf(v) - 1.f));
    }
}

torch::Tensor elu_cuda(torch::Tensor x, float alpha) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    const int threads = 256;
    const int blocks = (n + threads - 1) / threads;
    AT_DISPATCH_FLOATING_TYPES_AND_HALF(x.scalar_type(), "elu_cuda", ([&] {
        elu_kernel<scalar_t><<<blocks, threads>>>(x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), alpha, n);
    }));
    return y;
}
"""

elu_cpp_source = "torch::Tensor elu_cuda(torch::Tensor x, float alpha);"

elu = load_inline(
    name="styles_elu_dispatch_half",
    cpp_sources=elu_cpp_source,
    cuda_sources=elu_source,
    functions=["elu_cuda"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self, alpha: float = 1.0):
        super(ModelNew, self).__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return elu.elu_cuda(x.contiguous(), self.alpha)
