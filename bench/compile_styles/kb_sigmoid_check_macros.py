# Style: KernelBench / Kevin-style sigmoid with user CHECK_CUDA / CHECK_CONTIGUOUS / CHECK_INPUT macros
# built on TORCH_CHECK, in the CUDA source; cpp_sources holds the declaration only.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

sigmoid_source = r"""
#include <torch/extension.h>

#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

__global__ void sigmoid_kernel(const float* __restrict__ x, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = 1.0f / (1.0f + __expf(-x[i]));
    }
}

torch::Tensor sigmoid_forward(torch::Tensor x) {
    CHECK_INPUT(x);
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "sigmoid_forward: expected float32, got ", x.scalar_type());
    auto out = torch::empty_like(x);
    const int n = static_cast<int>(x.numel());
    const int threads = 1024;
    const int blocks = (n + threads - 1) / threads;
    sigmoid_kernel<<<blocks, threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

sigmoid_cpp = "torch::Tensor sigmoid_forward(torch::Tensor x);"

sigmoid_ext = load_inline(
    name="styles_sigmoid_check_macros",
    cpp_sources=[sigmoid_cpp],
    cuda_sources=[sigmoid_source],
    functions=["sigmoid_forward"],
    with_cuda=True,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sigmoid_ext.sigmoid_forward(x)
