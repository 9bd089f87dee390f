# Style: KernelBench level 2 generated sample (tanh then scale): a float scalar argument from the module's
# attribute, torch::empty({n}, x.options()) then view back to x.sizes().
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

tanh_scale_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void tanh_scale_kernel(const float* in, float* out, float scale, int64_t n) {
    int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (idx < n) {
        out[idx] = tanhf(in[idx]) * scale;
    }
}

torch::Tensor tanh_scale_cuda(torch::Tensor input, float scale) {
    auto n = input.numel();
    auto out = torch::empty({n}, input.options());
    const int block = 256;
    const int grid = (n + block - 1) / block;
    tanh_scale_kernel<<<grid, block>>>(input.data_ptr<float>(), out.data_ptr<float>(), scale, n);
    return out.view(input.sizes());
}
"""

tanh_scale_cpp_source = "torch::Tensor tanh_scale_cuda(torch::Tensor input, float scale);"

tanh_scale = load_inline(
    name="styles_tanh_scale",
    cpp_sources=tanh_scale_cpp_source,
    cuda_sources=tanh_scale_source,
    functions=["tanh_scale_cuda"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super(ModelNew, self).__init__()
        self.scale = scale
        self.tanh_scale = tanh_scale

    def forward(self, x):
        return self.tanh_scale.tanh_scale_cuda(x.contiguous(), float(self.scale))
