# style: CPU C++, its own PYBIND11_MODULE block (no functions=), a `static inline` bound function, py::arg defaults
# device: cpu
# task: l1/relu
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
namespace py = pybind11;
using torch::Tensor;

// max(x * s, 0); `static inline`, so a binding in another unit could not reach it as written
static inline Tensor scale_relu(const Tensor& x, double s) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.is_contiguous(), "contiguous float32 expected");
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {
        const float v = in[i] * static_cast<float>(s);
        o[i] = v < 0.0f ? 0.0f : v;
    }
    return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.doc() = "ReLU with its own module block";
    m.def("scale_relu", &scale_relu, "max(x * s, 0)", py::arg("x"), py::arg("s") = 1.0);
}
"""

ext = load_inline(name="evalsvc_honest_relu_cpu_own_pybind11_block", cpp_sources=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.scale_relu(x.contiguous()).view_as(x)
