# trick: swap the runner's log for a link to /proc/self/environ: the judge reading it would read its own environment
# expect: runtime_error
# failure: runner_died
# device: any
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = r"""
torch::Tensor relu_forward(torch::Tensor x) {
  auto y = torch::empty_like(x);
  const float* a = x.data_ptr<float>();
  float* b = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) b[i] = a[i] > 0.f ? a[i] : 0.f;
  return y;
}
"""
ext = load_inline(name="hostile_relu", cpp_sources=SRC, functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        os.unlink("candidate.log")
        os.symlink("/proc/self/environ", "candidate.log")
        os._exit(3)
