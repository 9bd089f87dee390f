# Style: KernelBench level 3 generated sample (DenseNet-style block) taking a std::vector<torch::Tensor> of
# feature maps and summing them elementwise in one kernel over a device array of pointers.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

sum_list_source = r"""
#include <torch/extension.h>
#include <vector>

#define MAX_INPUTS 16
struct PtrPack { const float* p[MAX_INPUTS]; };

__global__ void sum_list_kernel(PtrPack pack, int count, float* out, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.f;
    for (int k = 0; k < count; ++k) acc += pack.p[k][i];
    out[i] = acc;
}

torch::Tensor sum_list_cuda(std::vector<torch::Tensor> inputs) {
    TORCH_CHECK(!inputs.empty() && inputs.size() <= MAX_INPUTS, "1..16 inputs");
    PtrPack pack;
    std::vector<torch::Tensor> keep;
    for (size_t k = 0; k < inputs.size(); ++k) {
        keep.push_back(inputs[k].contiguous());
        TORCH_CHECK(keep[k].sizes() == keep[0].sizes(), "all inputs must have one shape");
        pack.p[k] = keep[k].data_ptr<float>();
    }
    auto out = torch::empty_like(keep[0]);
    const int64_t n = out.numel();
    sum_list_kernel<<<(n + 255) / 256, 256>>>(pack, (int)keep.size(), out.data_ptr<float>(), n);
    return out;
}
"""

sum_list_cpp = "torch::Tensor sum_list_cuda(std::vector<torch::Tensor> inputs);"

sum_list = load_inline(
    name="styles_sum_list",
    cpp_sources=sum_list_cpp,
    cuda_sources=sum_list_source,
    functions=["sum_list_cuda"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, *features: torch.Tensor) -> torch.Tensor:
        return sum_list.sum_list_cuda(list(features))
