# trick: exhaust host memory from a process that also holds a CUDA context
# expect: runtime_error
# device: cuda
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
__global__ void relu_k(const float* a, float* b, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) b[i] = a[i] > 0.f ? a[i] : 0.f;
}
torch::Tensor relu_forward(torch::Tensor x) {
  auto y = torch::empty_like(x);
  long n = x.numel();
  relu_k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""
ext = load_inline(name="membomb", cpp_sources="torch::Tensor relu_forward(torch::Tensor x);", cuda_sources=CUDA,
                  functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        hoard = []
        while True:
            hoard.append(bytearray(1 << 30))
