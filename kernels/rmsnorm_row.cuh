// One row's RMSNorm by a block of 256 threads: rmsnorm.cu's kernel, and the last block of a decode
// GEMV that normalises the row it made (gemv.cu, as_k_gemv_bf16_norm). One function, so both give
// the same bits (twin: ref/rmsnorm.c).
//   ms  = (sum_i x_i^2) / n          sum in f32, tree order (the one freedom: summation order)
//   inv = 1 / sqrt(ms + eps)         f32 add, IEEE sqrt, IEEE division: ref's "1.0f / sqrtf(ms + eps)"
//   y_i = bf16(w_i * (x_i * inv))    two f32 products, one bf16 rounding
// Each thread strides over the row's channels, a warp-shuffle then shared-memory reduction gives the
// sum. y may alias x: every thread reuses (or reads again) its x_i after the reduction and writes
// y_i itself. x is read through L2 (ld.cg): in a GEMV's last block, other blocks wrote the row, and
// this SM's L1 may hold older copies of its lines. yq (when not null; n a multiple of 32) gets the fp8
// act_quant's QDQ of y as well (quant.cuh's, bit for bit: a block of 32 channels is a warp's lanes),
// for the fp8 linears that read the normalised row.
#pragma once

#include "kernels/common.cuh"
#include "kernels/quant.cuh"

constexpr int kRmsThreads = 256;
constexpr int kRmsCached = 24; // values per thread kept in registers (rows up to 6144: dim 5120, q_lora 1280)

// The block's 1 / sqrt(sum / n + eps) from each thread's partial sum of squares: a warp xor tree, then
// the kRmsThreads / 32 warp partials (part, shared) added in warp order by every thread, so every
// thread holds the same value. Also row_pipe.cu's RMSNorm.
__device__ __forceinline__ float as_d_rms_inv(float acc, float *part, int n, float eps)
{
    const int tid = (int)threadIdx.x;
    acc = as_d_warp_sum(acc);
    if ((tid & 31) == 0)
        part[tid >> 5] = acc;
    __syncthreads();
    float sum = 0.0f;
    for (int k = 0; k < kRmsThreads / 32; k++) // every thread, same order: one value for the block
        sum = __fadd_rn(sum, part[k]);
    const float ms = __fdiv_rn(sum, (float)n);
    return __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(ms, eps)));
}

__device__ __forceinline__ void as_d_rmsnorm_row(const uint16_t *xr, const float *w, uint16_t *yr, uint16_t *yq, int n,
                                                 float eps)
{
    __shared__ float part[kRmsThreads / 32];
    const int tid = (int)threadIdx.x;
    // Rows up to kRmsCached * kRmsThreads: the thread's values are loaded first, all at once (a decode
    // row is one block: a chain of dependent loads would cost a memory latency each), then summed in
    // the same order as the generic loop, and reused by the output pass (no reload: y may alias x).
    const bool cached = n <= kRmsCached * kRmsThreads;
    float xv[kRmsCached], wv[kRmsCached];
    float acc = 0.0f;
    if (cached) {
#pragma unroll
        for (int k = 0; k < kRmsCached; k++) {
            const int i = tid + k * kRmsThreads;
            xv[k] = i < n ? as_d_bf16_to_f32(__ldcg(xr + i)) : 0.0f;
            wv[k] = i < n ? __ldg(w + i) : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < kRmsCached; k++)
            if (tid + k * kRmsThreads < n)
                acc = __fadd_rn(acc, __fmul_rn(xv[k], xv[k]));
    } else {
        for (int i = tid; i < n; i += kRmsThreads) {
            float v = as_d_bf16_to_f32(__ldcg(xr + i));
            acc = __fadd_rn(acc, __fmul_rn(v, v));
        }
    }
    const float inv = as_d_rms_inv(acc, part, n, eps);
    if (cached) {
#pragma unroll
        for (int k = 0; k < kRmsCached; k++) {
            const int i = tid + k * kRmsThreads;
            if (i < n) { // whole warps (n a multiple of 32 with yq): the quantiser's shuffles see every lane
                const uint16_t o = as_d_f32_to_bf16(__fmul_rn(wv[k], __fmul_rn(xv[k], inv)));
                yr[i] = o;
                if (yq)
                    yq[i] = as_d_quant_elem<AS_KQ_FP8>(o);
            }
        }
        return;
    }
    for (int i = tid; i < n; i += kRmsThreads) {
        float r = __fmul_rn(as_d_bf16_to_f32(__ldcg(xr + i)), inv);
        const uint16_t o = as_d_f32_to_bf16(__fmul_rn(w[i], r));
        yr[i] = o;
        if (yq)
            yq[i] = as_d_quant_elem<AS_KQ_FP8>(o);
    }
}
