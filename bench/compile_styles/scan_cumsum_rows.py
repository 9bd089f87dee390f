# Style: KernelBench level 1 "cumsum" generated sample: one block per row, a Hillis-Steele scan over chunks
# in shared memory with a running carry, dim argument handled by transpose + contiguous in Python.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cumsum_source = """
#include <torch/extension.h>

#define BLOCK 512

__global__ void cumsum_rows_kernel(const float* x, float* y, int cols) {
    __shared__ float buf[BLOCK];
    __shared__ float carry;
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;
    if (threadIdx.x == 0) carry = 0.f;
    __syncthreads();
    for (int base = 0; base < cols; base += BLOCK) {
        int c = base + threadIdx.x;
        buf[threadIdx.x] = c < cols ? xr[c] : 0.f;
        __syncthreads();
        for (int off = 1; off < BLOCK; off <<= 1) {
            float add = threadIdx.x >= off ? buf[threadIdx.x - off] : 0.f;
            __syncthreads();
            buf[threadIdx.x] += add;
            __syncthreads();
        }
        if (c < cols) yr[c] = buf[threadIdx.x] + carry;
        __syncthreads();
        if (threadIdx.x == BLOCK - 1) carry += buf[BLOCK - 1];
        __syncthreads();
    }
}

torch::Tensor cumsum_cuda(torch::Tensor x) {
    auto x2 = x.reshape({-1, x.size(-1)});
    auto y = torch::empty_like(x2);
    int rows = x2.size(0), cols = x2.size(1);
    cumsum_rows_kernel<<<rows, BLOCK>>>(x2.data_ptr<float>(), y.data_ptr<float>(), cols);
    return y.reshape(x.sizes());
}
"""

cumsum_cpp_source = "torch::Tensor cumsum_cuda(torch::Tensor x);"

cumsum = load_inline(
    name="styles_cumsum",
    cpp_sources=cumsum_cpp_source,
    cuda_sources=cumsum_source,
    functions=["cumsum_cuda"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x):
        xt = x.transpose(self.dim, -1).contiguous()
        return cumsum.cumsum_cuda(xt).transpose(self.dim, -1)
