# Style: CUDA Agent / production-extension style: const at::cuda::OptionalCUDAGuard device_guard(device_of(x))
# written as c10::cuda::CUDAGuard, launch on at::cuda::getCurrentCUDAStream(), clamp with float min/max.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

hardtanh_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

__global__ void hardtanh_kernel(const float* __restrict__ x, float* __restrict__ y, float min_val, float max_val, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        y[i] = fminf(fmaxf(x[i], min_val), max_val);
    }
}

torch::Tensor hardtanh_cuda(torch::Tensor x, float min_val, float max_val) {
    TORCH_CHECK(x.is_cuda(), "x must be on CUDA");
    c10::cuda::CUDAGuard device_guard(x.device());
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    const int threads = 256;
    const int sm_count = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const int blocks = std::min<int64_t>((n + threads - 1) / threads, (int64_t)sm_count * 32);
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    hardtanh_kernel<<<blocks, threads, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), min_val, max_val, n);
    AT_CUDA_CHECK(cudaGetLastError());
    return y;
}
"""

hardtanh_cpp = "torch::Tensor hardtanh_cuda(torch::Tensor x, float min_val, float max_val);"

hardtanh = load_inline(
    name="styles_hardtanh_guard",
    cpp_sources=hardtanh_cpp,
    cuda_sources=hardtanh_source,
    functions=["hardtanh_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, min_val: float = -1.0, max_val: float = 1.0):
        super().__init__()
        self.min_val, self.max_val = min_val, max_val

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return hardtanh.hardtanh_cuda(x.contiguous(), self.min_val, self.max_val)
