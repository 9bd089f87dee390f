# style: CUDA, 32x32 shared-memory tiles (padded against bank conflicts), 4 rows per thread, dim3 grids
# device: cuda
# task: l1/matmul
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

constexpr int TILE = 32;
constexpr int ROWS_PER_THREAD = 4;  // blockDim = (TILE, TILE / ROWS_PER_THREAD)

__global__ void matmul_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                             int M, int N, int K) {
    __shared__ float As[TILE][TILE + 1];
    __shared__ float Bs[TILE][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y, step = blockDim.y;
    const int row0 = blockIdx.y * TILE, col = blockIdx.x * TILE + tx;
    float acc[ROWS_PER_THREAD] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k0 = 0; k0 < K; k0 += TILE) {
        for (int r = ty; r < TILE; r += step) {
            const int ar = row0 + r, ac = k0 + tx, br = k0 + r;
            As[r][tx] = (ar < M && ac < K) ? A[(int64_t)ar * K + ac] : 0.0f;
            Bs[r][tx] = (br < K && col < N) ? B[(int64_t)br * N + col] : 0.0f;
        }
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < TILE; ++k) {
            const float bv = Bs[k][tx];
            #pragma unroll
            for (int i = 0; i < ROWS_PER_THREAD; ++i) acc[i] += As[ty + i * step][k] * bv;
        }
        __syncthreads();
    }
    #pragma unroll
    for (int i = 0; i < ROWS_PER_THREAD; ++i) {
        const int r = row0 + ty + i * step;
        if (r < M && col < N) C[(int64_t)r * N + col] = acc[i];
    }
}

torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda() && B.is_cuda(), "CUDA tensors expected");
    TORCH_CHECK(A.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32, "float32 expected");
    TORCH_CHECK(A.dim() == 2 && B.dim() == 2 && A.size(1) == B.size(0), "shape mismatch");
    auto a = A.contiguous();
    auto b = B.contiguous();
    const int M = (int)a.size(0), K = (int)a.size(1), N = (int)b.size(1);
    auto C = torch::empty({M, N}, a.options());
    if (M == 0 || N == 0) return C;
    dim3 block(TILE, TILE / ROWS_PER_THREAD);
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    matmul_tiled<<<grid, block, 0, c10::cuda::getCurrentCUDAStream()>>>(
        a.data_ptr<float>(), b.data_ptr<float>(), C.data_ptr<float>(), M, N, K);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return C;
}
"""

cpp_source = "torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B);"

matmul_ext = load_inline(
    name="evalsvc_honest_matmul_cuda_smem_tiled",
    cpp_sources=[cpp_source],
    cuda_sources=[cuda_source],
    functions=["matmul_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul_ext.matmul_forward(A, B)
