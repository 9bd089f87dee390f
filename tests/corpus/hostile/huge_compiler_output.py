# trick: flood the compile log (5,000 diagnostics, over 1 MB) to exhaust the worker's memory or logs
# expect: compile_error
# device: any
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

FLOOD = "\n".join(["#warning " + "flood " * 16] * 5_000)  # static: the same text at every import
SRC = FLOOD + "\ntorch::Tensor f(torch::Tensor x) { return undefined_symbol; }\n"
ext = load_inline(name="flood", cpp_sources=SRC, functions=["f"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.f(x)
