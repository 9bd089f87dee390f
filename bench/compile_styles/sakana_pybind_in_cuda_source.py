# Style: AI CUDA Engineer (Sakana) archive: the CUDA source carries its own PYBIND11_MODULE with
# m.def("forward", &forward, "..."), cpp_sources is empty and no functions= list is passed.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <cuda.h>
#include <cuda_runtime.h>

__global__ void hardsigmoid_kernel(const float* __restrict__ input, float* __restrict__ output, size_t numel) {
    const size_t idx = blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t)blockDim.x * gridDim.x;
    for (size_t i = idx; i < numel; i += stride) {
        float y = (input[i] + 3.0f) / 6.0f;
        output[i] = fminf(fmaxf(y, 0.0f), 1.0f);
    }
}

torch::Tensor forward(torch::Tensor input) {
    TORCH_CHECK(input.is_cuda(), "Input tensor must be on CUDA");
    auto output = torch::empty_like(input);
    const size_t numel = input.numel();
    const int threads = 1024;
    const int blocks = (numel + threads - 1) / threads;
    hardsigmoid_kernel<<<blocks, threads>>>(input.data_ptr<float>(), output.data_ptr<float>(), numel);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "CUDA kernel failed: ", cudaGetErrorString(err));
    return output;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("forward", &forward, "HardSigmoid activation forward (CUDA)");
}
"""

module = load_inline(
    name="styles_sakana_hardsigmoid",
    cpp_sources="",
    cuda_sources=cuda_src,
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return module.forward(x)
