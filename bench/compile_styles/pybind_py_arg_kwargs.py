# Style: Kevin / CUDA Agent binding written by hand in cpp_sources: PYBIND11_MODULE with py::arg names and a
# default value, the CUDA source defining the function; functions= is not passed.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

softplus_cuda = r"""
#include <torch/extension.h>

__global__ void softplus_kernel(const float* __restrict__ x, float* __restrict__ y, float beta, float threshold, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float bx = beta * x[i];
        y[i] = bx > threshold ? x[i] : log1pf(expf(bx)) / beta;
    }
}

torch::Tensor softplus(torch::Tensor x, double beta, double threshold) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    softplus_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)beta, (float)threshold, n);
    return y;
}
"""

softplus_cpp = r"""
#include <torch/extension.h>
namespace py = pybind11;

torch::Tensor softplus(torch::Tensor x, double beta, double threshold);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("softplus", &softplus, "Softplus (CUDA)", py::arg("x"), py::arg("beta") = 1.0, py::arg("threshold") = 20.0);
}
"""

softplus_ext = load_inline(
    name="styles_softplus_py_arg",
    cpp_sources=softplus_cpp,
    cuda_sources=softplus_cuda,
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softplus_ext.softplus(x.contiguous(), beta=1.0)
