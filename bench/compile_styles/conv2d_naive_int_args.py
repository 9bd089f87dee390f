# Style: KernelBench level 1 "conv2d" generated sample: direct convolution, one thread per output element,
# int stride/padding/dilation arguments, an optional-bias flag passed as bool, weights kept in nn.Parameter.
import math
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

conv2d_source = """
#include <torch/extension.h>

__global__ void conv2d_naive_kernel(const float* input, const float* weight, const float* bias, float* output,
                                    int N, int C, int H, int W, int K, int R, int S, int OH, int OW,
                                    int stride, int padding, int dilation, bool has_bias) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int total = N * K * OH * OW;
    if (idx >= total) return;
    int ow = idx % OW;
    int oh = (idx / OW) % OH;
    int k = (idx / (OW * OH)) % K;
    int n = idx / (OW * OH * K);
    float sum = has_bias ? bias[k] : 0.0f;
    for (int c = 0; c < C; ++c) {
        for (int r = 0; r < R; ++r) {
            int ih = oh * stride - padding + r * dilation;
            if (ih < 0 || ih >= H) continue;
            for (int s = 0; s < S; ++s) {
                int iw = ow * stride - padding + s * dilation;
                if (iw < 0 || iw >= W) continue;
                sum += input[((n * C + c) * H + ih) * W + iw] * weight[((k * C + c) * R + r) * S + s];
            }
        }
    }
    output[idx] = sum;
}

torch::Tensor conv2d_cuda(torch::Tensor input, torch::Tensor weight, torch::Tensor bias,
                          int stride, int padding, int dilation, bool has_bias) {
    int N = input.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
    int K = weight.size(0), R = weight.size(2), S = weight.size(3);
    int OH = (H + 2 * padding - dilation * (R - 1) - 1) / stride + 1;
    int OW = (W + 2 * padding - dilation * (S - 1) - 1) / stride + 1;
    auto output = torch::empty({N, K, OH, OW}, input.options());
    int total = N * K * OH * OW;
    int block = 256;
    int grid = (total + block - 1) / block;
    conv2d_naive_kernel<<<grid, block>>>(input.data_ptr<float>(), weight.data_ptr<float>(),
                                         has_bias ? bias.data_ptr<float>() : nullptr, output.data_ptr<float>(),
                                         N, C, H, W, K, R, S, OH, OW, stride, padding, dilation, has_bias);
    return output;
}
"""

conv2d_cpp_source = (
    "torch::Tensor conv2d_cuda(torch::Tensor input, torch::Tensor weight, torch::Tensor bias, "
    "int stride, int padding, int dilation, bool has_bias);"
)

conv2d = load_inline(
    name="styles_conv2d_naive",
    cpp_sources=conv2d_cpp_source,
    cuda_sources=conv2d_source,
    functions=["conv2d_cuda"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=False):
        super(ModelNew, self).__init__()
        self.stride, self.padding, self.dilation = stride, padding, dilation
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels, kernel_size, kernel_size))
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        has_bias = self.bias is not None
        b = self.bias if has_bias else torch.empty(0, device=x.device)
        return conv2d.conv2d_cuda(x.contiguous(), self.weight, b, self.stride, self.padding, self.dilation, has_bias)
