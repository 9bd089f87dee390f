# style: CUDA, cuBLAS SGEMM on PyTorch's handle and current stream (row-major trick: C^T = B^T A^T)
# device: cuda
# task: l1/matmul
# allow_vendor_libs: true
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>

torch::Tensor matmul_cublas(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda() && B.is_cuda(), "CUDA tensors expected");
    TORCH_CHECK(A.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32, "float32 expected");
    TORCH_CHECK(A.dim() == 2 && B.dim() == 2 && A.size(1) == B.size(0), "shape mismatch");
    auto a = A.contiguous();
    auto b = B.contiguous();
    const int M = (int)a.size(0), K = (int)a.size(1), N = (int)b.size(1);
    auto C = torch::empty({M, N}, a.options());
    if (M == 0 || N == 0) return C;
    cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();  // bound to the current stream
    const float alpha = 1.0f, beta = 0.0f;
    // cuBLAS is column-major: the row-major product C = A B is the column-major C^T = B^T A^T.
    const cublasStatus_t st = cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha,
                                          b.data_ptr<float>(), N, a.data_ptr<float>(), K, &beta,
                                          C.data_ptr<float>(), N);
    TORCH_CHECK(st == CUBLAS_STATUS_SUCCESS, "cublasSgemm failed with status ", (int)st);
    return C;
}
"""

cpp_source = "torch::Tensor matmul_cublas(torch::Tensor A, torch::Tensor B);"

blas_ext = load_inline(
    name="evalsvc_honest_matmul_cuda_cublas",
    cpp_sources=[cpp_source],
    cuda_sources=[cuda_source],
    functions=["matmul_cublas"],
    extra_cuda_cflags=["-O3"],
)  # cuBLAS symbols resolve against the libcublas that torch has already loaded


class ModelNew(nn.Module):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return blas_ext.matmul_cublas(A, B)
