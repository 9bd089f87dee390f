# Style: KernelBench level 2 generated sample that keeps the GEMM in ATen from the host code
# (torch::matmul / torch::addmm inside the C++ function) and fuses only the epilogue (bias + GELU) in a kernel.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
#include <torch/extension.h>

__global__ void bias_gelu_kernel(float* y, const float* bias, int rows, int cols) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < rows * cols) {
        float v = y[idx] + bias[idx % cols];
        y[idx] = 0.5f * v * (1.0f + erff(v * 0.70710678f));
    }
}

torch::Tensor linear_gelu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    auto y = torch::matmul(x, weight.t()).contiguous();
    int rows = y.size(0), cols = y.size(1);
    int threads = 256;
    bias_gelu_kernel<<<(rows * cols + threads - 1) / threads, threads>>>(y.data_ptr<float>(), bias.data_ptr<float>(), rows, cols);
    return y;
}
"""

cpp_source = "torch::Tensor linear_gelu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

linear_gelu = load_inline(
    name="styles_linear_gelu_aten_matmul",
    cpp_sources=cpp_source,
    cuda_sources=source,
    functions=["linear_gelu"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.linear_gelu = linear_gelu

    def forward(self, x):
        return self.linear_gelu.linear_gelu(x, self.linear.weight, self.linear.bias)
