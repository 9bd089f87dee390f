# Style: KernelBench level 3 generated sample (MLP block) with several kernels in one CUDA source and
# several host functions listed in functions=[...]; the model calls them one after another.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

mlp_kernels_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void linear_kernel(const float* x, const float* w, const float* b, float* y, int M, int N, int K) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float acc = b[col];
        for (int k = 0; k < K; ++k) acc += x[row * K + k] * w[col * K + k];
        y[row * N + col] = acc;
    }
}

__global__ void relu_inplace_kernel(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && y[i] < 0.f) y[i] = 0.f;
}

__global__ void dropout_free_residual_kernel(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

torch::Tensor linear_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    int M = x.size(0), K = x.size(1), N = w.size(0);
    auto y = torch::empty({M, N}, x.options());
    dim3 block(16, 16);
    dim3 grid((N + 15) / 16, (M + 15) / 16);
    linear_kernel<<<grid, block>>>(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), M, N, K);
    return y;
}

void relu_inplace(torch::Tensor y) {
    int n = y.numel();
    relu_inplace_kernel<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), n);
}

torch::Tensor residual_add(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    int n = a.numel();
    dropout_free_residual_kernel<<<(n + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

mlp_kernels_cpp_source = """
torch::Tensor linear_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b);
void relu_inplace(torch::Tensor y);
torch::Tensor residual_add(torch::Tensor a, torch::Tensor b);
"""

mlp_kernels = load_inline(
    name="styles_mlp_kernels",
    cpp_sources=mlp_kernels_cpp_source,
    cuda_sources=mlp_kernels_source,
    functions=["linear_forward", "relu_inplace", "residual_add"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size):
        super(ModelNew, self).__init__()
        self.fc1 = nn.Linear(input_size, hidden_size)
        self.fc2 = nn.Linear(hidden_size, input_size)

    def forward(self, x):
        h = mlp_kernels.linear_forward(x.contiguous(), self.fc1.weight, self.fc1.bias)
        mlp_kernels.relu_inplace(h)
        y = mlp_kernels.linear_forward(h, self.fc2.weight, self.fc2.bias)
        return mlp_kernels.residual_add(y, x.contiguous())
