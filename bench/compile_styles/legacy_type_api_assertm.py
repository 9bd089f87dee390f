# Style: older-PyTorch idioms that models still emit (KernelBench samples from 2024 models): x.type().is_cuda()
# inside AT_ASSERTM-based CHECK macros and x.data<float>() instead of data_ptr; leaky ReLU with a double slope.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

leaky_relu_source = """
#include <torch/extension.h>

#define CHECK_CUDA(x) AT_ASSERTM(x.type().is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) AT_ASSERTM(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

__global__ void leaky_relu_kernel(const float* x, float* y, float negative_slope, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = v >= 0 ? v : v * negative_slope;
    }
}

torch::Tensor leaky_relu_cuda(torch::Tensor x, double negative_slope) {
    CHECK_INPUT(x);
    auto y = torch::empty_like(x);
    int n = x.numel();
    leaky_relu_kernel<<<(n + 511) / 512, 512>>>(x.data<float>(), y.data<float>(), (float)negative_slope, n);
    return y;
}
"""

leaky_relu_cpp_source = "torch::Tensor leaky_relu_cuda(torch::Tensor x, double negative_slope);"

leaky_relu = load_inline(
    name="styles_leaky_relu_legacy",
    cpp_sources=leaky_relu_cpp_source,
    cuda_sources=leaky_relu_source,
    functions=["leaky_relu_cuda"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super(ModelNew, self).__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return leaky_relu.leaky_relu_cuda(x.contiguous(), self.negative_slope)
