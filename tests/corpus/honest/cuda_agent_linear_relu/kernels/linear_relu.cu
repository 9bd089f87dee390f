// out = relu(x @ w^T + b): 16x16 shared-memory tiles, bias and ReLU in the epilogue.
#include <cuda_runtime.h>
#include <cstdint>

namespace {

constexpr int T = 16;

__global__ void linear_relu_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                   const float* __restrict__ b, float* __restrict__ out, int M, int N, int K) {
    __shared__ float xs[T][T + 1];
    __shared__ float ws[T][T + 1];  // ws[n][k] = w[n0 + n][k0 + k]
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += T) {
        const int k = k0 + tx;
        const int wn = blockIdx.x * T + ty;
        xs[ty][tx] = (row < M && k < K) ? x[(int64_t)row * K + k] : 0.0f;
        ws[ty][tx] = (wn < N && k < K) ? w[(int64_t)wn * K + k] : 0.0f;
        __syncthreads();
        #pragma unroll
        for (int kk = 0; kk < T; ++kk) acc += xs[ty][kk] * ws[tx][kk];
        __syncthreads();
    }
    if (row < M && col < N) {
        const float v = acc + b[col];
        out[(int64_t)row * N + col] = v > 0.0f ? v : 0.0f;
    }
}

}  // namespace

extern "C" cudaError_t launch_linear_relu(const float* x, const float* w, const float* b, float* out, int M, int N,
                                          int K, cudaStream_t stream) {
    const dim3 block(T, T);
    const dim3 grid((N + T - 1) / T, (M + T - 1) / T);
    linear_relu_kernel<<<grid, block, 0, stream>>>(x, w, b, out, M, N, K);
    return cudaGetLastError();
}
