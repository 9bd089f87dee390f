# trick: an illegal memory access in a kernel, which poisons the CUDA context of its process
# expect: runtime_error
# device: cuda
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
__global__ void bad(float* out) { out[(size_t)threadIdx.x * (1ull << 40)] = 1.0f; }
torch::Tensor relu_forward(torch::Tensor x) {
  auto y = torch::empty_like(x);
  bad<<<1, 32>>>(y.data_ptr<float>());
  return y;
}
"""
ext = load_inline(name="illegal", cpp_sources="torch::Tensor relu_forward(torch::Tensor x);", cuda_sources=CUDA,
                  functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x.contiguous())
