# Style: CUDA Agent / Kevin linear-layer kernel with an optional bias typed c10::optional<torch::Tensor>
# (bias.has_value() / bias.value()), the model passing None when bias=False.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

linear_source = """
#include <torch/extension.h>

__global__ void linear_kernel(const float* x, const float* w, const float* b, float* y, int M, int N, int K) {
    int m = blockIdx.y;
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    float acc = b ? b[n] : 0.f;
    for (int k = 0; k < K; ++k) acc += x[(size_t)m * K + k] * w[(size_t)n * K + k];
    y[(size_t)m * N + n] = acc;
}

torch::Tensor linear_forward(torch::Tensor x, torch::Tensor weight, c10::optional<torch::Tensor> bias) {
    const int M = x.size(0), K = x.size(1), N = weight.size(0);
    auto y = torch::empty({M, N}, x.options());
    const float* bptr = nullptr;
    if (bias.has_value() && bias->defined()) bptr = bias.value().data_ptr<float>();
    dim3 grid((N + 127) / 128, M);
    linear_kernel<<<grid, 128>>>(x.data_ptr<float>(), weight.data_ptr<float>(), bptr, y.data_ptr<float>(), M, N, K);
    return y;
}
"""

linear_cpp = "torch::Tensor linear_forward(torch::Tensor x, torch::Tensor weight, c10::optional<torch::Tensor> bias);"

linear_ext = load_inline(
    name="styles_linear_optional_bias",
    cpp_sources=linear_cpp,
    cuda_sources=linear_source,
    functions=["linear_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=bias)

    def forward(self, x):
        return linear_ext.linear_forward(x.contiguous(), self.linear.weight, self.linear.bias)
