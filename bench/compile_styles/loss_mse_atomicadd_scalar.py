# Style: KernelBench level 1 "MSELoss" generated sample: block reduction then atomicAdd into a
# torch::zeros({1}, ...) accumulator, a one-thread kernel for the mean, returned as a 0-d tensor via squeeze().
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

mse_source = r"""
#include <torch/extension.h>

__global__ void mse_kernel(const float* __restrict__ pred, const float* __restrict__ target, float* __restrict__ acc, int n) {
    __shared__ float cache[256];
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + tid;
    float local = 0.f;
    for (; i < n; i += blockDim.x * gridDim.x) {
        float d = pred[i] - target[i];
        local += d * d;
    }
    cache[tid] = local;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) cache[tid] += cache[tid + s];
        __syncthreads();
    }
    if (tid == 0) atomicAdd(acc, cache[0]);
}

__global__ void divide_kernel(float* acc, int n) { acc[0] /= (float)n; }

torch::Tensor mse_loss_cuda(torch::Tensor predictions, torch::Tensor targets) {
    TORCH_CHECK(predictions.numel() == targets.numel(), "size mismatch");
    auto acc = torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat32).device(predictions.device()));
    int n = predictions.numel();
    int threads = 256;
    int blocks = std::min((n + threads - 1) / threads, 1024);
    mse_kernel<<<blocks, threads>>>(predictions.data_ptr<float>(), targets.data_ptr<float>(), acc.data_ptr<float>(), n);
    divide_kernel<<<1, 1>>>(acc.data_ptr<float>(), n);
    return acc.squeeze();
}
"""

mse_cpp_source = "torch::Tensor mse_loss_cuda(torch::Tensor predictions, torch::Tensor targets);"

mse = load_inline(
    name="styles_mse_loss",
    cpp_sources=mse_cpp_source,
    cuda_sources=mse_source,
    functions=["mse_loss_cuda"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, predictions, targets):
        return mse.mse_loss_cuda(predictions.contiguous(), targets.contiguous())
