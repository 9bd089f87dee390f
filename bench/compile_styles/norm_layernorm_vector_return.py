# Style: CUDA Agent / KernelBench level 1 LayerNorm sample: weight and bias tensors, a float eps argument,
# std::vector<torch::Tensor> return (output, mean, rstd), Welford-free two-pass reduction in shared memory.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

layernorm_cuda = r"""
#include <torch/extension.h>
#include <vector>

__global__ void layernorm_fwd_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                     const float* __restrict__ beta, float* __restrict__ y,
                                     float* __restrict__ mean_out, float* __restrict__ rstd_out,
                                     int N, float eps) {
    extern __shared__ float buf[];
    const int row = blockIdx.x;
    const float* xr = x + (size_t)row * N;
    float* yr = y + (size_t)row * N;

    float s = 0.f, ss = 0.f;
    for (int i = threadIdx.x; i < N; i += blockDim.x) { float v = xr[i]; s += v; ss += v * v; }
    buf[threadIdx.x] = s;
    buf[threadIdx.x + blockDim.x] = ss;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) {
            buf[threadIdx.x] += buf[threadIdx.x + stride];
            buf[threadIdx.x + blockDim.x] += buf[threadIdx.x + blockDim.x + stride];
        }
        __syncthreads();
    }
    const float mean = buf[0] / N;
    const float var = buf[blockDim.x] / N - mean * mean;
    const float rstd = rsqrtf(var + eps);
    if (threadIdx.x == 0) { mean_out[row] = mean; rstd_out[row] = rstd; }
    for (int i = threadIdx.x; i < N; i += blockDim.x) yr[i] = (xr[i] - mean) * rstd * gamma[i] + beta[i];
}

std::vector<torch::Tensor> layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, float eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "all inputs must be CUDA tensors");
    const int N = weight.numel();
    TORCH_CHECK(x.numel() % N == 0, "normalized_shape does not divide x");
    auto xc = x.contiguous();
    const int M = xc.numel() / N;
    auto y = torch::empty_like(xc);
    auto mean = torch::empty({M}, xc.options());
    auto rstd = torch::empty({M}, xc.options());
    const int threads = 256;
    layernorm_fwd_kernel<<<M, threads, 2 * threads * sizeof(float)>>>(
        xc.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(),
        mean.data_ptr<float>(), rstd.data_ptr<float>(), N, eps);
    return {y, mean, rstd};
}
"""

layernorm_cpp = "std::vector<torch::Tensor> layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, float eps);"

layernorm_ext = load_inline(
    name="styles_layernorm",
    cpp_sources=[layernorm_cpp],
    cuda_sources=[layernorm_cuda],
    functions=["layernorm_forward"],
    extra_cuda_cflags=["-O3", "--use_fast_math"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _, _ = layernorm_ext.layernorm_forward(x, self.weight, self.bias, self.eps)
        return y
