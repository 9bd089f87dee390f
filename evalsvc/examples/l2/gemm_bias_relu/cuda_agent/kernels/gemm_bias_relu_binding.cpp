#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

#include "../binding_registry.h"

extern "C" int gemm_bias_relu_splits(int M, int N, int K);
extern "C" cudaError_t launch_gemm_bias_relu(const float* x, const float* weight, const float* bias, float* out,
                                              float* workspace, int splits, int M, int N, int K,
                                              cudaStream_t stream);

// out = relu(x @ weight^T + bias)
static torch::Tensor gemm_bias_relu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                bias.scalar_type() == torch::kFloat32, "float32 expected");
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(), "contiguous tensors expected");
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && bias.dim() == 1, "x, weight must be 2-D and bias 1-D");
    TORCH_CHECK(x.size(1) == weight.size(1) && bias.size(0) == weight.size(0), "shape mismatch");
    TORCH_CHECK(x.get_device() == weight.get_device() && x.get_device() == bias.get_device(), "tensors on different GPUs");
    TORCH_CHECK(x.size(0) < (1LL << 31) && x.size(1) < (1LL << 31) && weight.size(0) < (1LL << 31), "too large");
    const int M = static_cast<int>(x.size(0));
    const int K = static_cast<int>(x.size(1));
    const int N = static_cast<int>(weight.size(0));
    auto out = torch::empty({M, N}, x.options());
    if (M == 0 || N == 0) return out;
    const int splits = gemm_bias_relu_splits(M, N, K);
    TORCH_CHECK(splits >= 1, "gemm_bias_relu: could not query the device");
    // split-K partial sums (only when the K dimension is split)
    torch::Tensor workspace;
    if (splits > 1) workspace = torch::empty({splits, M, N}, x.options());
    const cudaError_t err = launch_gemm_bias_relu(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(),
                                                  out.data_ptr<float>(), splits > 1 ? workspace.data_ptr<float>() : nullptr,
                                                  splits, M, N, K, at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "gemm_bias_relu launch failed: ", cudaGetErrorString(err));
    return out;
}

void register_gemm_bias_relu(pybind11::module& m) {
    m.def("gemm_bias_relu", &gemm_bias_relu_forward, "relu(x @ weight^T + bias)",
          pybind11::arg("x"), pybind11::arg("weight"), pybind11::arg("bias"));
}

REGISTER_BINDING(gemm_bias_relu, register_gemm_bias_relu);
