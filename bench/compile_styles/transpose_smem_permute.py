# Style: KernelBench level 1 generated sample for a transpose op: a 32x33 shared-memory tile transpose
# kernel, host code with x.stride() checks, x.contiguous(), x.select() per batch, two functions.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

transpose_source = r"""
#include <torch/extension.h>

#define TILE_DIM 32
#define BLOCK_ROWS 8

__global__ void transpose_kernel(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];
    int x = blockIdx.x * TILE_DIM + threadIdx.x;
    int y = blockIdx.y * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE_DIM + threadIdx.x;
    y = blockIdx.x * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (x < rows && y + j < cols) out[(size_t)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

torch::Tensor transpose_2d(torch::Tensor in) {
    TORCH_CHECK(in.dim() == 2, "expected 2D");
    auto x = in.stride(1) == 1 ? in : in.contiguous();
    int rows = x.size(0), cols = x.size(1);
    auto out = torch::empty({cols, rows}, x.options());
    dim3 block(TILE_DIM, BLOCK_ROWS);
    dim3 grid((cols + TILE_DIM - 1) / TILE_DIM, (rows + TILE_DIM - 1) / TILE_DIM);
    transpose_kernel<<<grid, block>>>(x.data_ptr<float>(), out.data_ptr<float>(), rows, cols);
    return out;
}

torch::Tensor transpose_last2(torch::Tensor x) {
    // (B, R, C) -> (B, C, R): one 2D transpose per batch entry through select() views
    TORCH_CHECK(x.dim() == 3, "expected 3D");
    auto xc = x.contiguous();
    auto out = torch::empty({x.size(0), x.size(2), x.size(1)}, x.options());
    for (int64_t b = 0; b < x.size(0); ++b) {
        auto src = xc.select(0, b);
        auto dst = out.select(0, b);
        dim3 block(TILE_DIM, BLOCK_ROWS);
        dim3 grid((src.size(1) + TILE_DIM - 1) / TILE_DIM, (src.size(0) + TILE_DIM - 1) / TILE_DIM);
        transpose_kernel<<<grid, block>>>(src.data_ptr<float>(), dst.data_ptr<float>(), src.size(0), src.size(1));
    }
    return out;
}
"""

transpose_cpp = """
torch::Tensor transpose_2d(torch::Tensor in);
torch::Tensor transpose_last2(torch::Tensor x);
"""

transpose_ext = load_inline(
    name="styles_transpose_smem",
    cpp_sources=transpose_cpp,
    cuda_sources=transpose_source,
    functions=["transpose_2d", "transpose_last2"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 2:
            return transpose_ext.transpose_2d(x)
        return transpose_ext.transpose_last2(x)
