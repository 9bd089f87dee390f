# style: CPU C++, plain scalar loop (no OpenMP), output allocated in Python and passed in; aliased imports
# device: cpu
# task: l1/relu
import torch as T
from torch import nn as N
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <algorithm>

// out[i] = max(x[i], 0); std::max(NaN, 0) keeps the NaN, like torch.relu.
void relu_into(torch::Tensor x, torch::Tensor out) {
    TORCH_CHECK(!x.is_cuda() && x.scalar_type() == torch::kFloat32, "float32 CPU tensor expected");
    TORCH_CHECK(x.is_contiguous() && out.is_contiguous() && x.numel() == out.numel(), "bad shapes");
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) dst[i] = std::max(src[i], 0.0f);
}
"""

_ext = load_inline(
    name="evalsvc_honest_relu_cpu_scalar_loop",
    cpp_sources=[CPP],
    functions=["relu_into"],
    extra_cflags=["-O3"],
)


class ModelNew(N.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: T.Tensor) -> T.Tensor:
        x = x.contiguous()
        out = T.empty_like(x)
        _ext.relu_into(x, out)
        return out
