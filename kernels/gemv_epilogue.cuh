// The epilogue of the warp-group GEMVs, shared by gemv.cu (bf16 / f32 weights) and q2k_mmvq.cu
// (Q2_K weights), whose CPU twins sum in the same order. Not in common.cuh: bench/emu shadows that
// file, and the emulator must run this code itself.
#pragma once

#include "kernels/common.cuh"

// A group of w_warps consecutive warps computes R output rows for M token rows: each acc[r][t] is
// summed over its warp, then over the group's warps in warp order (the CPU twins' order), and lane
// r * M + t of the group's first warp stores output row row0 + r of token t in batch b, f32 or bf16
// (Args: GemvArgs or MmvqArgs). Every thread of the block calls it; red holds a row of R * M
// partials per warp. With res (bf16 y only): res[t * ldres + o] = bf16(res + y) after the store, the
// residual add of as_k_residual_add folded in (the same two roundings).
template <int R, int M, typename Args>
__device__ __forceinline__ void as_d_group_sum_store(float (&acc)[R][M], float (*red)[R * M], int w_warps, int row0,
                                                     int64_t b, const Args &a, uint16_t *res = nullptr,
                                                     int64_t ldres = 0)
{
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int group = warp / w_warps, wig = warp % w_warps;
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int t = 0; t < M; t++)
            acc[r][t] = as_d_warp_sum(acc[r][t]);
    if (lane == 0) {
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int t = 0; t < M; t++)
                red[warp][r * M + t] = acc[r][t];
    }
    __syncthreads();
    if (wig == 0 && lane < R * M) {
        float out = 0.0f;
        for (int k = 0; k < w_warps; k++)
            out += red[group * w_warps + k][lane];
        const int r = lane / M, t = lane % M, o = row0 + r;
        if (t < a.m && o < a.n_out) {
            const int64_t off = b * a.strideY + (int64_t)t * a.ldy + o;
            if (a.y_f32) {
                ((float *)a.y)[off] = out;
            } else {
                const uint16_t y = as_d_f32_to_bf16(out);
                ((uint16_t *)a.y)[off] = y;
                if (res) {
                    uint16_t *h = res + (int64_t)t * ldres + o;
                    *h = as_d_f32_to_bf16(__fadd_rn(as_d_bf16_to_f32(*h), as_d_bf16_to_f32(y)));
                }
            }
        }
    }
}
