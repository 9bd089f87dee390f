# Style: KernelBench level 2 generated sample "scale + residual add": float scale argument, a bool in_place
# flag (writes into x and returns it, else a new tensor).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

scale_add_source = """
#include <torch/extension.h>

__global__ void scale_add_kernel(float* out, const float* x, const float* residual, float scale, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = x[i] * scale + residual[i];
    }
}

torch::Tensor scale_add_cuda(torch::Tensor x, torch::Tensor residual, float scale, bool in_place) {
    TORCH_CHECK(x.sizes() == residual.sizes(), "x and residual must have the same shape");
    torch::Tensor out = in_place ? x : torch::empty_like(x);
    int n = x.numel();
    int threads = 256;
    int blocks = (n + threads - 1) / threads;
    scale_add_kernel<<<blocks, threads>>>(out.data_ptr<float>(), x.data_ptr<float>(), residual.data_ptr<float>(), scale, n);
    return out;
}
"""

scale_add_cpp_source = "torch::Tensor scale_add_cuda(torch::Tensor x, torch::Tensor residual, float scale, bool in_place);"

scale_add = load_inline(
    name="styles_scale_add",
    cpp_sources=scale_add_cpp_source,
    cuda_sources=scale_add_source,
    functions=["scale_add_cuda"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self, scaling_factor):
        super(ModelNew, self).__init__()
        self.scaling_factor = scaling_factor
        self.scale_add = scale_add

    def forward(self, x, residual):
        return self.scale_add.scale_add_cuda(x.contiguous(), residual.contiguous(), self.scaling_factor, False)
