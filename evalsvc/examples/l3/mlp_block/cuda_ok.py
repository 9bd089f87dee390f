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

constexpr int EPI_BIAS_GELU = 2;      // exact (erf) GELU, as nn.GELU()
constexpr int EPI_BIAS_RESIDUAL = 3;  // + residual

template <int EPI>
__device__ __forceinline__ float epilogue(float v, const float* __restrict__ bias, const float* __restrict__ res,
                                          int64_t idx, int n) {
    v += bias[n];
    if constexpr (EPI == EPI_BIAS_GELU) {
        return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    } else {
        return v + res[idx];
    }
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

// LayerNorm over the last dim: one warp per row (mean, then centred variance, then the write).
__global__ void layernorm_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                                 float* __restrict__ y, int rows, int D, float eps) {
    const int warps_per_block = blockDim.x / 32;
    const int row = blockIdx.x * warps_per_block + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float* xr = x + (int64_t)row * D;
    float* yr = y + (int64_t)row * D;
    float s = 0.0f;
    for (int j = lane; j < D; j += 32) s += xr[j];
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    const float mean = s / (float)D;
    float v = 0.0f;
    for (int j = lane; j < D; j += 32) { const float d = xr[j] - mean; v += d * d; }
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const float rstd = rsqrtf(v / (float)D + eps);
    for (int j = lane; j < D; j += 32) yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
}

// out = x + fc2(gelu(fc1(layernorm(x)))): LayerNorm kernel, GEMM + bias + GELU, GEMM + bias + residual.
torch::Tensor mlp_block_forward(torch::Tensor x, torch::Tensor ln_w, torch::Tensor ln_b, double eps,
                                torch::Tensor w1, torch::Tensor b1, torch::Tensor w2, torch::Tensor b2) {
    for (const auto& t : {x, ln_w, ln_b, w1, b1, w2, b2}) {
        TORCH_CHECK(t.is_cuda() && t.scalar_type() == torch::kFloat32 && t.is_contiguous(),
                    "contiguous float32 CUDA tensors expected");
    }
    TORCH_CHECK(x.dim() == 2, "x must be 2-D (tokens x dim)");
    TORCH_CHECK(x.size(0) < (1LL << 31) && x.size(1) < (1LL << 31) && w1.size(0) < (1LL << 31), "too large");
    const int T = (int)x.size(0), D = (int)x.size(1), H = (int)w1.size(0);
    TORCH_CHECK(ln_w.numel() == D && ln_b.numel() == D, "layernorm parameters must have dim elements");
    TORCH_CHECK(w1.size(1) == D && b1.numel() == H && w2.size(0) == D && w2.size(1) == H && b2.numel() == D,
                "linear parameter shapes do not match");
    auto out = torch::empty({T, D}, x.options());
    if (T == 0) return out;
    auto xn = torch::empty({T, D}, x.options());
    auto h = torch::empty({T, H}, x.options());
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const int ln_threads = 256, rows_per_block = ln_threads / 32;
    layernorm_kernel<<<(T + rows_per_block - 1) / rows_per_block, ln_threads, 0, stream>>>(
        x.data_ptr<float>(), ln_w.data_ptr<float>(), ln_b.data_ptr<float>(), xn.data_ptr<float>(), T, D, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    launch_gemm<true, EPI_BIAS_GELU>(xn.data_ptr<float>(), w1.data_ptr<float>(), b1.data_ptr<float>(), nullptr,
                                     h.data_ptr<float>(), T, H, D, x.options(), stream);
    launch_gemm<true, EPI_BIAS_RESIDUAL>(h.data_ptr<float>(), w2.data_ptr<float>(), b2.data_ptr<float>(),
                                         x.data_ptr<float>(), out.data_ptr<float>(), T, D, H, x.options(), stream);
    return out;
}
"""

cpp_source = """torch::Tensor mlp_block_forward(torch::Tensor x, torch::Tensor ln_w, torch::Tensor ln_b, double eps,
                                torch::Tensor w1, torch::Tensor b1, torch::Tensor w2, torch::Tensor b2);"""

mlp_ext = load_inline(
    name="evalsvc_ex_l3_mlp_block_cuda_ok",
    cpp_sources=[cpp_source],
    cuda_sources=[cuda_source],
    functions=["mlp_block_forward"],
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        # Same submodule names as the reference, so its state_dict loads; they only hold parameters.
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return mlp_ext.mlp_block_forward(
            x.contiguous(),
            self.norm.weight.contiguous(),
            self.norm.bias.contiguous(),
            self.norm.eps,
            self.fc1.weight.contiguous(),
            self.fc1.bias.contiguous(),
            self.fc2.weight.contiguous(),
            self.fc2.bias.contiguous(),
        )
