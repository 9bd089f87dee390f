# trick: flood the compile log (hundreds of thousands of diagnostics) to exhaust the worker
# expect: compile_error
# device: any
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = "\n".join(f"int f{i}() {{ return undefined_symbol_{i}; }}" for i in range(1))  # static: same every import
SRC += r"""
#define A(x) x x x x x x x x x x
#define B(x) A(A(A(A(x))))
B(int g(){ return nope; })
"""
ext = load_inline(name="flood", cpp_sources=SRC, functions=["f0"], extra_cflags=["-fmax-errors=0"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.f0(x)
