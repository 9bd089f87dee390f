# Style: KernelBench level 2 "Gemm + BiasAdd + ReLU" generated sample: one fused tiled kernel computing
# x @ W^T + b then ReLU, nn.Linear's parameters reused, output via torch::empty({batch, out}, x.options()).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

fused_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define TS 16

// y[m, n] = relu(sum_k x[m, k] * w[n, k] + b[n])
__global__ void gemm_bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                      const float* __restrict__ b, float* __restrict__ y,
                                      int M, int N, int K) {
    __shared__ float xs[TS][TS];
    __shared__ float ws[TS][TS + 1];
    int m = blockIdx.y * TS + threadIdx.y;
    int n = blockIdx.x * TS + threadIdx.x;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += TS) {
        xs[threadIdx.y][threadIdx.x] = (m < M && k0 + threadIdx.x < K) ? x[(size_t)m * K + k0 + threadIdx.x] : 0.f;
        int wn = blockIdx.x * TS + threadIdx.y;
        ws[threadIdx.y][threadIdx.x] = (wn < N && k0 + threadIdx.x < K) ? w[(size_t)wn * K + k0 + threadIdx.x] : 0.f;
        __syncthreads();
        for (int kk = 0; kk < TS; ++kk) acc += xs[threadIdx.y][kk] * ws[threadIdx.x][kk];
        __syncthreads();
    }
    if (m < M && n < N) y[(size_t)m * N + n] = fmaxf(acc + b[n], 0.f);
}

torch::Tensor gemm_bias_relu_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    const int M = x.size(0);
    const int K = x.size(1);
    const int N = weight.size(0);
    auto y = torch::empty({M, N}, x.options());
    dim3 block(TS, TS);
    dim3 grid((N + TS - 1) / TS, (M + TS - 1) / TS);
    gemm_bias_relu_kernel<<<grid, block>>>(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(),
                                           y.data_ptr<float>(), M, N, K);
    return y;
}
"""

fused_cpp = "torch::Tensor gemm_bias_relu_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

gemm_bias_relu = load_inline(
    name="styles_gemm_bias_relu",
    cpp_sources=fused_cpp,
    cuda_sources=fused_source,
    functions=["gemm_bias_relu_cuda"],
    verbose=True,
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3", "--use_fast_math"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.fused = gemm_bias_relu

    def forward(self, x):
        return self.fused.gemm_bias_relu_cuda(x.contiguous(), self.gemm.weight.contiguous(), self.bias.contiguous())
