# Style: KernelBench level 1 "batched matmul" generated sample: 3D tensors, blockIdx.z over the batch,
# x.sizes() unpacked, torch::empty({b, m, n}, A.options()), launched on c10::cuda::getCurrentCUDAStream().
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

bmm_source = """
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

#define TILE 16

__global__ void bmm_tiled_kernel(const float* A, const float* B, float* C, int M, int K, int N) {
    int b = blockIdx.z;
    const float* Ab = A + (size_t)b * M * K;
    const float* Bb = B + (size_t)b * K * N;
    float* Cb = C + (size_t)b * M * N;
    __shared__ float sA[TILE][TILE];
    __shared__ float sB[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float sum = 0.0f;
    for (int t = 0; t < K; t += TILE) {
        sA[threadIdx.y][threadIdx.x] = (row < M && t + threadIdx.x < K) ? Ab[row * K + t + threadIdx.x] : 0.0f;
        sB[threadIdx.y][threadIdx.x] = (col < N && t + threadIdx.y < K) ? Bb[(t + threadIdx.y) * N + col] : 0.0f;
        __syncthreads();
        for (int i = 0; i < TILE; ++i) sum += sA[threadIdx.y][i] * sB[i][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) Cb[row * N + col] = sum;
}

torch::Tensor bmm_cuda(torch::Tensor A, torch::Tensor B) {
    auto sizes_a = A.sizes();
    auto sizes_b = B.sizes();
    TORCH_CHECK(sizes_a.size() == 3 && sizes_b.size() == 3, "expected 3D inputs");
    int batch = sizes_a[0], M = sizes_a[1], K = sizes_a[2], N = sizes_b[2];
    auto C = torch::empty({batch, M, N}, A.options());
    dim3 threads(TILE, TILE);
    dim3 blocks((N + TILE - 1) / TILE, (M + TILE - 1) / TILE, batch);
    auto stream = c10::cuda::getCurrentCUDAStream();
    bmm_tiled_kernel<<<blocks, threads, 0, stream>>>(A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(), M, K, N);
    return C;
}
"""

bmm_cpp_source = "torch::Tensor bmm_cuda(torch::Tensor A, torch::Tensor B);"

bmm = load_inline(
    name="styles_bmm",
    cpp_sources=bmm_cpp_source,
    cuda_sources=bmm_source,
    functions=["bmm_cuda"],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.bmm = bmm

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return self.bmm.bmm_cuda(A.contiguous(), B.contiguous())
