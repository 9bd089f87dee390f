# Style: AI CUDA Engineer (Sakana) depthwise conv1d entry: __constant__ weights copied with
# cudaMemcpyToSymbol, a host wrapper named forward, int64_t stride/padding arguments, C10_CUDA_KERNEL_LAUNCH_CHECK.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

depthwise_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

#define MAX_WEIGHTS 8192
__constant__ float c_weight[MAX_WEIGHTS];

__global__ void depthwise_conv1d_kernel(const float* __restrict__ x, float* __restrict__ y,
                                        int B, int C, int L, int K, int L_out, int stride, int padding) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * C * L_out) return;
    int lo = idx % L_out;
    int c = (idx / L_out) % C;
    int b = idx / (L_out * C);
    const float* xr = x + ((size_t)b * C + c) * L;
    float acc = 0.f;
#pragma unroll 4
    for (int k = 0; k < K; ++k) {
        int li = lo * stride - padding + k;
        if (li >= 0 && li < L) acc += xr[li] * c_weight[c * K + k];
    }
    y[idx] = acc;
}

torch::Tensor forward(torch::Tensor x, torch::Tensor weight, int64_t stride, int64_t padding) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(weight.numel() <= MAX_WEIGHTS, "weight too large for constant memory");
    const int B = x.size(0), C = x.size(1), L = x.size(2);
    const int K = weight.size(-1);
    const int L_out = (L + 2 * padding - K) / stride + 1;
    auto w = weight.contiguous();
    C10_CUDA_CHECK(cudaMemcpyToSymbol(c_weight, w.data_ptr<float>(), w.numel() * sizeof(float), 0,
                                      cudaMemcpyDeviceToDevice));
    auto y = torch::empty({B, C, L_out}, x.options());
    const int threads = 256;
    const int blocks = (B * C * L_out + threads - 1) / threads;
    depthwise_conv1d_kernel<<<blocks, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), B, C, L, K, L_out,
                                                 (int)stride, (int)padding);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

depthwise_cpp = "torch::Tensor forward(torch::Tensor x, torch::Tensor weight, int64_t stride, int64_t padding);"

depthwise = load_inline(
    name="styles_depthwise_conv1d",
    cpp_sources=depthwise_cpp,
    cuda_sources=depthwise_source,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, kernel_size: int, stride: int = 1, padding: int = 0, bias: bool = False):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, in_channels, kernel_size, stride=stride, padding=padding,
                              groups=in_channels, bias=False)
        self.stride, self.padding = stride, padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return depthwise.forward(x.contiguous(), self.conv.weight, self.stride, self.padding)
