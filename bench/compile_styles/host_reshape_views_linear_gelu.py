# Style: KernelBench level 2 generated sample (Linear + GELU) whose host code reshapes with ATen views
# (x.reshape({-1, K}), weight.contiguous(), out.view(...)) around one fused GEMM + bias + GELU kernel.
# (An earlier version called torch::matmul in the host code: evalsvc refuses that, rule aten-compute.)
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
#include <torch/extension.h>

__global__ void linear_bias_gelu_kernel(const float* x, const float* w, const float* bias, float* y, int rows, int cols, int K) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < rows * cols) {
        int r = idx / cols, c = idx % cols;
        float v = bias[c];
        for (int k = 0; k < K; ++k) v += x[r * K + k] * w[c * K + k];
        y[idx] = 0.5f * v * (1.0f + erff(v * 0.70710678f));
    }
}

torch::Tensor linear_gelu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    const int K = x.size(-1);
    auto x2 = x.reshape({-1, K}).contiguous();
    auto w = weight.contiguous();
    int rows = x2.size(0), cols = w.size(0);
    auto y = torch::empty({rows, cols}, x.options());
    int threads = 256;
    linear_bias_gelu_kernel<<<(rows * cols + threads - 1) / threads, threads>>>(x2.data_ptr<float>(), w.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(), rows, cols, K);
    auto out_shape = x.sizes().vec();
    out_shape.back() = cols;
    return y.view(out_shape);
}
"""

cpp_source = "torch::Tensor linear_gelu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

linear_gelu = load_inline(
    name="styles_linear_gelu_host_views",
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
