// The epilogue of the warp-group GEMVs, shared by gemv.cu (bf16 / f32 weights) and q2k_mmvq.cu
// (Q2_K weights), whose CPU twins sum in the same order. Not in common.cuh: tools/emu shadows that
// file, and the emulator must run this code itself.
#pragma once

#include "kernels/common.cuh"
#include "kernels/rmsnorm_row.cuh"
#include "kernels/rope_pair.cuh"

// q's RoPE folded into the store of the GEMV that makes q (wq_b): output row o is channel o % hd of
// head o / hd; the pairs (hd - rd + 2k, + 1) of each head are rotated at token t's position (pos_d ?
// pos_d[t] : pos0 + t; a negative position leaves the row unrotated), s negated when inverse: rope.cu's
// rotation of the stored bf16 values. R even, so a pair's two rows are one group's (lanes r * M + t
// and (r ^ 1) * M + t).
struct AsDRope {
    const float *cos_t, *sin_t; // [max_seq][rd / 2]
    int hd, rd, pos0;
    const int32_t *pos_d;
    int inverse;
};

// The residual add folded into a GEMV's store: *h = bf16(h + y), as_k_residual_add's two roundings.
__device__ __forceinline__ void as_d_residual_store(uint16_t *h, uint16_t y)
{
    *h = as_d_f32_to_bf16(__fadd_rn(as_d_bf16_to_f32(*h), as_d_bf16_to_f32(y)));
}

// A group of w_warps consecutive warps computes R output rows for M token rows: each acc[r][t] is
// summed over its warp, then over the group's warps in warp order (the CPU twins' order), and lane
// r * M + t of the group's first warp stores output row row0 + r of token t in batch b, f32 or bf16
// (Args: GemvArgs or MmvqArgs). Every thread of the block calls it; red holds a row of R * M
// partials per warp. bf16 y only: with rope, the pairs are rotated before the store (AsDRope); with
// res, res[t * ldres + o] = bf16(res + y) after it, the residual add of as_k_residual_add folded in
// (the same two roundings).
template <int R, int M, typename Args>
__device__ __forceinline__ void as_d_group_sum_store(float (&acc)[R][M], float (*red)[R * M], int w_warps, int row0,
                                                     int64_t b, const Args &a, uint16_t *res = nullptr,
                                                     int64_t ldres = 0, const AsDRope *rope = nullptr)
{
    static_assert(R * M <= 32, "one lane a (row, token) of the group");
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
    if (wig != 0) // the group's first warp stores (the whole warp: the RoPE partner comes by shuffle)
        return;
    const bool mine = lane < R * M;
    float out = 0.0f;
    if (mine)
        for (int k = 0; k < w_warps; k++)
            out += red[group * w_warps + k][lane];
    const int r = lane / M, t = lane % M, o = row0 + r;
    const bool store = mine && t < a.m && o < a.n_out;
    const int64_t off = b * a.strideY + (int64_t)t * a.ldy + o;
    if (a.y_f32) {
        if (store)
            ((float *)a.y)[off] = out;
        return;
    }
    uint16_t y = as_d_f32_to_bf16(out);
    if (rope) {
        const uint16_t other = __shfl_xor_sync(0xffffffffu, y, M); // row o ^ 1, token t
        const int ch = o % rope->hd - (rope->hd - rope->rd);
        if (store && ch >= 0) {
            const int p = rope->pos_d ? rope->pos_d[t] : rope->pos0 + t;
            if (p >= 0) {
                const int half = rope->rd / 2, k = ch / 2;
                const float c = rope->cos_t[(int64_t)p * half + k], s = rope->sin_t[(int64_t)p * half + k];
                uint16_t x0 = ch % 2 ? other : y, x1 = ch % 2 ? y : other;
                as_d_rope_pair(x0, x1, c, rope->inverse ? -s : s);
                y = ch % 2 ? x1 : x0;
            }
        }
    }
    if (store) {
        ((uint16_t *)a.y)[off] = y;
        if (res)
            as_d_residual_store(res + (int64_t)t * ldres + o, y);
    }
}

// The last block of a GEMV launch to finish normalises the output row (as_k_gemv_bf16_norm,
// as_k_gemv_e4m3_norm): each block's stores are fenced before it counts itself, so the last one counted
// sees every row. Every thread of every block calls it once, after its last store (Args: the GEMV's
// arguments, with res, y, n_out and norm {w, y, eps, ctr}).
template <typename Args> __device__ __forceinline__ void as_d_gemv_norm_after(const Args &a)
{
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
        last = atomicAdd(a.norm.ctr, 1u) == gridDim.x * gridDim.y - 1;
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    as_d_rmsnorm_row(a.res ? a.res : (const uint16_t *)a.y, a.norm.w, a.norm.y, nullptr, a.n_out, a.norm.eps);
    if (threadIdx.x == 0)
        *a.norm.ctr = 0; // for the next launch: visible once this grid completes
}
