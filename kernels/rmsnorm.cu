// RMSNorm of rows (twin: ref/rmsnorm.c, test: tests/gpu_rmsnorm.c).
//   ms  = (sum_i x_i^2) / n          sum in f32, tree order (the one freedom: summation order)
//   inv = 1 / sqrt(ms + eps)         f32 add, IEEE sqrt, IEEE division: ref's "1.0f / sqrtf(ms + eps)"
//   y_i = bf16(w_i * (x_i * inv))    two f32 products, one bf16 rounding
// Launch: one block of 256 threads per row (grid = rows); each thread strides over the row's
// channels, a warp-shuffle then shared-memory reduction gives the sum. y may alias x: every
// thread reads its x_i again after the reduction and writes y_i in the same thread.
#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace {

constexpr int kThreads = 256;
constexpr int kCached = 24; // values per thread kept in registers (rows up to 6144: dim 5120, q_lora 1280)

__global__ void rmsnorm_kernel(const uint16_t *x, int64_t ldx, const float *w, uint16_t *y, int64_t ldy, int n,
                               float eps)
{
    as_d_pdl_wait();
    __shared__ float part[kThreads / 32];
    const uint16_t *xr = x + (int64_t)blockIdx.x * ldx;
    uint16_t *yr = y + (int64_t)blockIdx.x * ldy;

    // Rows up to kCached * kThreads: the thread's values are loaded first, all at once (a decode row
    // is one block: a chain of dependent loads would cost a memory latency each), then summed in the
    // same order as the generic loop, and reused by the output pass (no reload: y may alias x).
    const bool cached = n <= kCached * kThreads;
    float xv[kCached], wv[kCached];
    float acc = 0.0f;
    if (cached) {
#pragma unroll
        for (int k = 0; k < kCached; k++) {
            const int i = threadIdx.x + k * kThreads;
            xv[k] = i < n ? as_d_bf16_to_f32(xr[i]) : 0.0f;
            wv[k] = i < n ? __ldg(w + i) : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < kCached; k++)
            if (threadIdx.x + k * kThreads < n)
                acc = __fadd_rn(acc, __fmul_rn(xv[k], xv[k]));
    } else {
        for (int i = threadIdx.x; i < n; i += kThreads) {
            float v = as_d_bf16_to_f32(xr[i]);
            acc = __fadd_rn(acc, __fmul_rn(v, v));
        }
    }
    acc = as_d_warp_sum(acc);
    if ((threadIdx.x & 31) == 0)
        part[threadIdx.x >> 5] = acc;
    __syncthreads();
    float sum = 0.0f;
    for (int k = 0; k < kThreads / 32; k++) // every thread, same order: one value for the block
        sum = __fadd_rn(sum, part[k]);

    float ms = __fdiv_rn(sum, (float)n);
    float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(ms, eps)));
    if (cached) {
#pragma unroll
        for (int k = 0; k < kCached; k++) {
            const int i = threadIdx.x + k * kThreads;
            if (i < n)
                yr[i] = as_d_f32_to_bf16(__fmul_rn(wv[k], __fmul_rn(xv[k], inv)));
        }
        return;
    }
    for (int i = threadIdx.x; i < n; i += kThreads) {
        float r = __fmul_rn(as_d_bf16_to_f32(xr[i]), inv);
        yr[i] = as_d_f32_to_bf16(__fmul_rn(w[i], r));
    }
}

} // namespace

extern "C" int as_k_rmsnorm(const as_bf16_t *x, int64_t ldx, const float *w, as_bf16_t *y, int64_t ldy, int rows,
                            int n, float eps, cudaStream_t st)
{
    if (rows < 0 || n <= 0 || ldx < n || ldy < n)
        return (int)cudaErrorInvalidValue;
    if (rows == 0)
        return 0;
    if (!x || !w || !y)
        return (int)cudaErrorInvalidValue;
    // y aliasing x is only meaningful row for row (same rows, same stride).
    if ((const void *)x == (const void *)y && ldx != ldy)
        return (int)cudaErrorInvalidValue;
    as_launch(rmsnorm_kernel, rows, kThreads, 0, st, x, ldx, w, y, ldy, n, eps);
    return AS_LAUNCH_RESULT();
}
