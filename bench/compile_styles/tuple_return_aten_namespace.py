# Style: KernelBench level 2 generated sample written against the at:: namespace (<ATen/ATen.h>, at::Tensor,
# at::empty) returning std::tuple<at::Tensor, at::Tensor> (range and max along the last dim).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

minmax_source = r"""
#include <ATen/ATen.h>
#include <tuple>
#include <cfloat>

__global__ void row_minmax_kernel(const float* __restrict__ x, float* __restrict__ mn, float* __restrict__ mx, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* p = x + (size_t)r * cols;
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int c = 0; c < cols; ++c) { lo = fminf(lo, p[c]); hi = fmaxf(hi, p[c]); }
    mn[r] = hi - lo;
    mx[r] = hi;
}

std::tuple<at::Tensor, at::Tensor> row_minmax(const at::Tensor& x) {
    auto xc = x.contiguous();
    const int cols = xc.size(-1);
    const int rows = xc.numel() / cols;
    at::Tensor mn = at::empty({rows}, xc.options());
    at::Tensor mx = at::empty({rows}, xc.options());
    row_minmax_kernel<<<(rows + 127) / 128, 128>>>(xc.data_ptr<float>(), mn.data_ptr<float>(), mx.data_ptr<float>(), rows, cols);
    return std::make_tuple(mn, mx);
}
"""

minmax_cpp = """
#include <tuple>
std::tuple<at::Tensor, at::Tensor> row_minmax(const at::Tensor& x);
"""

minmax = load_inline(
    name="styles_row_minmax_tuple",
    cpp_sources=minmax_cpp,
    cuda_sources=minmax_source,
    functions=["row_minmax"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        value_range, _ = minmax.row_minmax(x)
        return value_range
