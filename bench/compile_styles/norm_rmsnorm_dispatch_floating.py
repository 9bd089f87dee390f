# Style: KernelBench level 1 RMSNorm generated sample with a templated kernel and
# AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), ...), normalising over dim 1 of (B, C, ...) input.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

rms_norm_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

template <typename scalar_t>
__global__ void rms_norm_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ out,
                                const int batch, const int features, const int spatial, const float eps) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= batch * spatial) return;
    const int b = idx / spatial;
    const int s = idx % spatial;
    const scalar_t* base = x + (size_t)b * features * spatial + s;
    scalar_t* obase = out + (size_t)b * features * spatial + s;
    scalar_t sumsq = 0;
    for (int f = 0; f < features; ++f) {
        scalar_t v = base[(size_t)f * spatial];
        sumsq += v * v;
    }
    const scalar_t inv = rsqrt(sumsq / features + static_cast<scalar_t>(eps));
    for (int f = 0; f < features; ++f) obase[(size_t)f * spatial] = base[(size_t)f * spatial] * inv;
}

torch::Tensor rms_norm_cuda(torch::Tensor x, float eps) {
    auto output = torch::empty_like(x);
    const int batch = x.size(0);
    const int features = x.size(1);
    int spatial = 1;
    for (int d = 2; d < x.dim(); ++d) spatial *= x.size(d);
    const int total = batch * spatial;
    const int threads = 256;
    const int blocks = (total + threads - 1) / threads;

    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rms_norm_cuda", ([&] {
        rms_norm_kernel<scalar_t><<<blocks, threads>>>(
            x.data_ptr<scalar_t>(), output.data_ptr<scalar_t>(), batch, features, spatial, eps);
    }));
    return output;
}
"""

rms_norm_cpp_source = "torch::Tensor rms_norm_cuda(torch::Tensor x, float eps);"

rms_norm = load_inline(
    name="styles_rms_norm",
    cpp_sources=rms_norm_cpp_source,
    cuda_sources=rms_norm_source,
    functions=["rms_norm_cuda"],
    verbose=True,
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super(ModelNew, self).__init__()
        self.num_features = num_features
        self.eps = eps
        self.rms_norm = rms_norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rms_norm.rms_norm_cuda(x.contiguous(), self.eps)
