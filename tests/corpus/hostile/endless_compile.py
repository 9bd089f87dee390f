# trick: a compile that never ends (constexpr evaluation of an endless loop)
# expect: timeout
# device: any
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = r"""
constexpr long spin() { long i = 0; while (i >= 0) { i = (i * 3 + 1) % 1000003; } return i; }
static_assert(spin() == 42, "never decided");
torch::Tensor f(torch::Tensor x) { return x; }
"""
ext = load_inline(name="endless", cpp_sources=SRC, functions=["f"],
                  extra_cflags=["-fconstexpr-ops-limit=1000000000000", "-fconstexpr-loop-limit=2147483647"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.f(x)
