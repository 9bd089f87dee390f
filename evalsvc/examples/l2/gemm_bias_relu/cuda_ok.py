import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <cstdint>

// Number of SMs of the current device (sizes the grids).
static int num_sms() {
    int dev = 0, sms = 0;
    C10_CUDA_CHECK(cudaGetDevice(&dev));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    return sms;
}

constexpr int EPI_BIAS_RELU = 1;

template <int EPI>
__device__ __forceinline__ float epilogue(float v, const float* __restrict__ bias, const float* __restrict__, int64_t, int n) {
    v += bias[n];
    return v < 0.0f ? 0.0f : v;
}

// Tiled SGEMM: C (M x N) = epilogue(A (M x K) @ op(B)), A row-major.
//   B_NK = false: B is K x N row-major (plain matmul).
//   B_NK = true : B is N x K row-major (nn.Linear weight, i.e. A @ B^T).
// Block tile BM x BN, K step BK; each thread owns a TM x TN (4 x 4) register tile.
// Shared tiles are double-buffered: the next K step's global loads are issued into registers
// before the current step's FMAs, and stored to the other buffer after them (one barrier per step).
// Split-K: blockIdx.z takes K range [z * k_chunk, (z + 1) * k_chunk); with gridDim.z > 1 the raw
// partial sums go to part[z] and splitk_reduce_kernel adds them and applies the epilogue.
template <int BM, int BN, int BK, bool B_NK, int EPI>
__global__ void __launch_bounds__((BM / 4) * (BN / 4))
gemm_kernel(const float* __restrict__ A, const float* __restrict__ B, const float* __restrict__ bias,
            const float* __restrict__ res, float* __restrict__ C, float* __restrict__ part,
            int M, int N, int K, int k_chunk) {
    constexpr int TM = 4, TN = 4;
    constexpr int NT = (BM / TM) * (BN / TN);
    constexpr int A_LD = BM * BK / NT;
    constexpr int B_LD = BN * BK / NT;
    static_assert(A_LD * NT == BM * BK && B_LD * NT == BN * BK, "tile does not divide over the threads");
    __shared__ __align__(16) float As[2][BK][BM + 4];
    __shared__ __align__(16) float Bs[2][BK][BN + 4];

    const int tid = threadIdx.x;
    const int tx = tid % (BN / TN), ty = tid / (BN / TN);
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int k_begin = blockIdx.z * k_chunk;
    const int k_end = min(K, k_begin + k_chunk);

    float ra[A_LD], rb[B_LD];
    auto load_global = [&](int k0) {
        #pragma unroll
        for (int i = 0; i < A_LD; ++i) {
            const int idx = tid + i * NT, r = idx / BK, c = idx % BK;
            const int gm = m0 + r, gk = k0 + c;
            ra[i] = (gm < M && gk < k_end) ? __ldg(A + (int64_t)gm * K + gk) : 0.0f;
        }
        #pragma unroll
        for (int i = 0; i < B_LD; ++i) {
            const int idx = tid + i * NT;
            if (B_NK) {
                const int n = idx / BK, k = idx % BK, gn = n0 + n, gk = k0 + k;
                rb[i] = (gn < N && gk < k_end) ? __ldg(B + (int64_t)gn * K + gk) : 0.0f;
            } else {
                const int k = idx / BN, n = idx % BN, gn = n0 + n, gk = k0 + k;
                rb[i] = (gn < N && gk < k_end) ? __ldg(B + (int64_t)gk * N + gn) : 0.0f;
            }
        }
    };
    auto store_shared = [&](int buf) {
        #pragma unroll
        for (int i = 0; i < A_LD; ++i) {
            const int idx = tid + i * NT;
            As[buf][idx % BK][idx / BK] = ra[i];
        }
        #pragma unroll
        for (int i = 0; i < B_LD; ++i) {
            const int idx = tid + i * NT;
            if (B_NK) Bs[buf][idx % BK][idx / BK] = rb[i];
            else      Bs[buf][idx / BN][idx % BN] = rb[i];
        }
    };

    float acc[TM][TN];
    #pragma unroll
    for (int i = 0; i < TM; ++i)
        #pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    const int ksteps = k_end > k_begin ? (k_end - k_begin + BK - 1) / BK : 0;
    if (ksteps > 0) {
        load_global(k_begin);
        store_shared(0);
    }
    __syncthreads();
    for (int t = 0; t < ksteps; ++t) {
        const int cur = t & 1;
        if (t + 1 < ksteps) load_global(k_begin + (t + 1) * BK);
        #pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float4 a = *reinterpret_cast<const float4*>(&As[cur][k][ty * TM]);
            const float4 b = *reinterpret_cast<const float4*>(&Bs[cur][k][tx * TN]);
            const float av[4] = {a.x, a.y, a.z, a.w};
            const float bv[4] = {b.x, b.y, b.z, b.w};
            #pragma unroll
            for (int i = 0; i < TM; ++i)
                #pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        if (t + 1 < ksteps) store_shared(cur ^ 1);
        __syncthreads();
    }

    const bool split = gridDim.z > 1;
    float* dst = split ? part + (int64_t)blockIdx.z * M * N : C;
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = m0 + ty * TM + i;
        if (m >= M) continue;
        #pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int n = n0 + tx * TN + j;
            if (n >= N) continue;
            const int64_t idx = (int64_t)m * N + n;
            dst[idx] = split ? acc[i][j] : epilogue<EPI>(acc[i][j], bias, res, idx, n);
        }
    }
}

template <int EPI>
__global__ void splitk_reduce_kernel(const float* __restrict__ part, int splits, const float* __restrict__ bias,
                                     const float* __restrict__ res, float* __restrict__ C, int64_t MN, int N) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < MN; i += stride) {
        float s = 0.0f;
        for (int z = 0; z < splits; ++z) s += part[z * MN + i];
        C[i] = epilogue<EPI>(s, bias, res, i, (int)(i % N));
    }
}

constexpr int GEMM_BM = 64, GEMM_BN = 64, GEMM_BK = 16;

// Split-K factor: doubled (up to 8, keeping >= 64 of K per split) until there are about 1.5
// blocks per SM; small-M GEMMs otherwise leave most SMs idle.
static int gemm_splits(int M, int N, int K, int sms) {
    const int64_t tiles = (int64_t)((M + GEMM_BM - 1) / GEMM_BM) * ((N + GEMM_BN - 1) / GEMM_BN);
    int s = 1;
    while (s < 8 && tiles * s * 2 < 3LL * sms && K / (2 * s) >= 64) s *= 2;
    return s;
}

template <bool B_NK, int EPI>
static void launch_gemm(const float* A, const float* B, const float* bias, const float* res, float* C,
                        int M, int N, int K, const torch::TensorOptions& opts, cudaStream_t stream) {
    TORCH_CHECK((M + GEMM_BM - 1) / GEMM_BM <= 65535, "M too large for this kernel");
    const int sms = num_sms();
    const int splits = gemm_splits(M, N, K, sms);
    int k_chunk = ((K + splits - 1) / splits + GEMM_BK - 1) / GEMM_BK * GEMM_BK;
    k_chunk = k_chunk < GEMM_BK ? GEMM_BK : k_chunk;
    const int used = K > 0 ? (K + k_chunk - 1) / k_chunk : 1;
    torch::Tensor part;
    if (used > 1) part = torch::empty({used, M, N}, opts);
    float* part_ptr = used > 1 ? part.data_ptr<float>() : nullptr;
    const dim3 grid((N + GEMM_BN - 1) / GEMM_BN, (M + GEMM_BM - 1) / GEMM_BM, used);
    gemm_kernel<GEMM_BM, GEMM_BN, GEMM_BK, B_NK, EPI><<<grid, (GEMM_BM / 4) * (GEMM_BN / 4), 0, stream>>>(
        A, B, bias, res, C, part_ptr, M, N, K, k_chunk);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    if (used > 1) {
        const int64_t mn = (int64_t)M * N;
        int64_t blocks = (mn + 255) / 256;
        blocks = blocks > (int64_t)sms * 8 ? (int64_t)sms * 8 : blocks;
        splitk_reduce_kernel<EPI><<<(unsigned)blocks, 256, 0, stream>>>(part_ptr, used, bias, res, C, mn, N);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
}

// out = relu(x @ weight^T + bias): one kernel, bias and ReLU applied to the accumulators.
torch::Tensor linear_relu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                bias.scalar_type() == torch::kFloat32, "float32 expected");
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(), "contiguous tensors expected");
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && bias.dim() == 1, "x, weight must be 2-D and bias 1-D");
    TORCH_CHECK(x.size(1) == weight.size(1) && bias.size(0) == weight.size(0), "shape mismatch");
    TORCH_CHECK(x.size(0) < (1LL << 31) && x.size(1) < (1LL << 31) && weight.size(0) < (1LL << 31), "too large");
    const int M = (int)x.size(0), K = (int)x.size(1), N = (int)weight.size(0);
    auto out = torch::empty({M, N}, x.options());
    if (M == 0 || N == 0) return out;
    launch_gemm<true, EPI_BIAS_RELU>(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(), nullptr,
                                     out.data_ptr<float>(), M, N, K, x.options(), c10::cuda::getCurrentCUDAStream());
    return out;
}
"""

cpp_source = "torch::Tensor linear_relu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

gemm_ext = load_inline(
    name="evalsvc_ex_l2_gemm_bias_relu_cuda_ok",
    cpp_sources=[cpp_source],
    cuda_sources=[cuda_source],
    functions=["linear_relu_forward"],
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        # Holds linear.weight / linear.bias under the same names as the reference; never called.
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gemm_ext.linear_relu_forward(
            x.contiguous(), self.linear.weight.contiguous(), self.linear.bias.contiguous()
        )
