#include <torch/extension.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include "../binding_registry.h"

extern "C" cudaError_t launch_linear_relu(const float* x, const float* w, const float* b, float* out, int M, int N,
                                          int K, cudaStream_t stream);

static torch::Tensor linear_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                bias.scalar_type() == torch::kFloat32, "float32 expected");
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(), "contiguous tensors expected");
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1) && bias.size(0) == weight.size(0),
                "shape mismatch");
    const c10::cuda::OptionalCUDAGuard guard(x.device());
    const int M = (int)x.size(0), K = (int)x.size(1), N = (int)weight.size(0);
    auto out = torch::empty({M, N}, x.options());
    if (M == 0 || N == 0) return out;
    const cudaError_t err = launch_linear_relu(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(),
                                               out.data_ptr<float>(), M, N, K, c10::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "linear_relu launch failed: ", cudaGetErrorString(err));
    return out;
}

static void register_linear_relu(pybind11::module& m) {
    m.def("linear_relu", &linear_relu, "relu(x @ weight^T + bias)", pybind11::arg("x"), pybind11::arg("weight"),
          pybind11::arg("bias"));
}

REGISTER_BINDING(linear_relu, register_linear_relu);
