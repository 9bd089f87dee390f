# Style: KernelBench level 1 "AvgPool2d" generated sample that includes <torch/torch.h> rather than
# torch/extension.h in the CUDA source, int kernel_size/stride/padding, count_include_pad semantics.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

avgpool_source = """
#include <torch/torch.h>
#include <cuda_runtime.h>

__global__ void avg_pool2d_kernel(const float* input, float* output, int N, int C, int H, int W,
                                  int OH, int OW, int k, int stride, int pad) {
    int index = blockIdx.x * blockDim.x + threadIdx.x;
    if (index >= N * C * OH * OW) return;
    int ow = index % OW;
    int oh = (index / OW) % OH;
    int nc = index / (OW * OH);
    int h0 = oh * stride - pad, w0 = ow * stride - pad;
    float sum = 0.0f;
    for (int i = 0; i < k; ++i) {
        for (int j = 0; j < k; ++j) {
            int h = h0 + i, w = w0 + j;
            if (h >= 0 && h < H && w >= 0 && w < W) sum += input[(nc * H + h) * W + w];
        }
    }
    output[index] = sum / (k * k);
}

torch::Tensor avg_pool2d_cuda(torch::Tensor input, int kernel_size, int stride, int padding) {
    int N = input.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
    int OH = (H + 2 * padding - kernel_size) / stride + 1;
    int OW = (W + 2 * padding - kernel_size) / stride + 1;
    auto output = torch::empty({N, C, OH, OW}, input.options());
    int total = N * C * OH * OW;
    int threads = 256;
    int blocks = (total + threads - 1) / threads;
    avg_pool2d_kernel<<<blocks, threads>>>(input.data_ptr<float>(), output.data_ptr<float>(), N, C, H, W, OH, OW,
                                           kernel_size, stride, padding);
    return output;
}
"""

avgpool_cpp_source = "torch::Tensor avg_pool2d_cuda(torch::Tensor input, int kernel_size, int stride, int padding);"

avg_pool2d = load_inline(
    name="styles_avg_pool2d",
    cpp_sources=avgpool_cpp_source,
    cuda_sources=avgpool_source,
    functions=["avg_pool2d_cuda"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = None, padding: int = 0):
        super(ModelNew, self).__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return avg_pool2d.avg_pool2d_cuda(x.contiguous(), self.kernel_size, self.stride, self.padding)
