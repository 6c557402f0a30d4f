// Decode GEMV of fp8-form weights (twin: ref/fp8_linear.c for the fp8 linear, ref/linear.c for the bf16
// linear of fp8-form weights; test: tests/gpu_fp8_gemv.c; bench: bench/kernels_bench.cu).
//
//   fp8 linear (SPEC 2):  y_b[t][o] = sum_k (sum_{i in k} xq[t][i] Wq[o][i]) * sx[t][k] * Ws[o/32][k]
//   bf16 x (wo_a):        y_b[t][o] = sum_k (sum_{i in k} x[t][i] Wq[o][i]) * Ws[o/32][k]
//                         = sum_i x[t][i] bf16(Wq[o][i] Ws), the bf16 linear of the dequantised weight
//   t < m <= 8, k the 32-wide blocks of n_in, Wq e4m3 codes (one byte a weight), Ws f32 per 32 x 32 block.
//
// Memory bound: every weight byte is read once, so the kernel is a stream over W, one byte a weight
// where the bf16 GEMV (kernels/gemv.cu) reads two. Design:
//   * a tile is 8 consecutive output rows; a "group" of W_WARPS warps (1, 2, 4 or 8) computes one tile at
//     a time, warp w of the group taking the k-blocks w, w + W_WARPS, ... (split-K); a block has 8 warps
//     = 8 / W_WARPS groups, loops over tiles (at most as many blocks as are resident at once: one wave);
//     grid.y = batch.
//   * one k-block of one tile is one tensor-core product per warp, the weights as the B operand (8 rows
//     = the 8 columns of mma.m16n8k32, lane (g, c) loads 8 bytes of row g: one 8-byte stream load), the
//     token rows as A (token g in row g of the 16; rows 8..15 zero). Inside a block the k order is free
//     (the products are exact and their sum is a sum), so lane c takes the block's bytes 8c..8c+7 as the
//     fragment's k 4c..4c+3 and 16+4c..16+4c+3, in the weights and the activations alike.
//     fp8 linear: mma.m16n8k32 e4m3 x e4m3 on the act_quant codes (kernels/act_quant.cu); bf16 x: the
//     8 weights exactly to bf16 and two mma.m16n8k16 bf16 (the x bytes 8c..8c+3 to the first, 4..7 to the
//     second). The block's sum D[t][r] (c0, c1: token g, rows 2c, 2c+1) is then scaled and added to the
//     lane's accumulators in k order: acc += D * (sx[t][k] * Ws) (both scales powers of two for e8m0
//     weights: their product is exact, and so is D times it).
//   * a ring of 8 k-blocks in flight per warp: a block's operands are consumed and the slot refilled with
//     the block 8 further on; the first ring's weights go out before the PDL wait (weights are never
//     written by the kernel before), the activations after it.
//   * reduction: the group's warps' accumulators through shared memory, summed in warp order by the
//     group's first warp, which stores (bf16 RNE or f32) and, as kernels/gemv.cu, can add the residual,
//     rotate q's RoPE pairs (rows 2c, 2c + 1 are a pair: one lane holds both) or, in the last block,
//     normalise the finished row (gemv_epilogue.cuh).
//   * portable: where mma.sync has no e4m3 form (the compute_80 PTX) or when asked (tests), each lane
//     computes the same D[t][r] itself from the bytes, the products in f32 (exact) in k order.
// Needs n_in a multiple of 32, W rows 8-byte aligned, the codes of x 8-byte aligned (bf16 x 16-byte).
#include <stdio.h>

#include "kernels/common.cuh"
#include "kernels/fp8.cuh"
#include "kernels/gemv_epilogue.cuh"
#include "kernels/kernels.h"
#include "kernels/mma.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRing = 16; // k-blocks of weights in flight per warp
enum { kActE4M3 = 0, kActBf16 = 1 };
#if defined(AS_FP8_MMA) || defined(AS_EMU)
constexpr bool kE4m3Mma = true; // mma.sync takes e4m3 here
#else
constexpr bool kE4m3Mma = false;
#endif

struct Fp8GemvArgs {
    AsFp8Weight w;
    const uint8_t *xq; // kActE4M3: act_quant's codes and scales
    int64_t ldxq, stride_xq;
    const float *sx;
    int64_t ldsx, stride_sx;
    const uint16_t *x; // kActBf16: bf16 activations
    int64_t ldx, stride_x;
    int n_out, m;
    void *y;
    int64_t ldy, stride_y;
    int y_f32;
    uint16_t *res; // batch 1, bf16 y: res[t][o] = bf16(res[t][o] + y[t][o]) (rows ldres apart)
    int64_t ldres;
    AsDRope rope; // rope.rd > 0: q's RoPE before the store (batch 1, bf16 y)
    struct {
        const float *w;
        uint16_t *y;
        float eps;
        unsigned *ctr;
    } norm; // norm.ctr: the RMSNorm of the finished row (m = 1, batch 1) into norm.y (gemv_epilogue.cuh)
};

// One k-block's weights of one lane, in flight in the ring.
struct Slot {
    uint2 w;  // row g of the tile, bytes 8c..8c+7 of the block
    float ws; // the weight's block scale
};

// Shared memory of a block: the m token rows of x as the previous kernel left them (act_quant's codes
// and scales, or bf16 values), staged once after the PDL wait. Rows are padded by 16 bytes so that the
// 8 token rows' fragments of a block fall on different banks.
__host__ __device__ constexpr int64_t x_row_bytes(int act, int n_in) { return (act == 0 ? n_in : 2 * (int64_t)n_in) + 16; }
__host__ __device__ constexpr int64_t smem_bytes(int act, int m, int n_in)
{
    return m * x_row_bytes(act, n_in) + (act == 0 ? 4 * (int64_t)m * (n_in / 32) : 0);
}

// The block's sums D[g][2c + e] (e = 0, 1) of this lane: the tensor-core form. xf: token g's bytes
// 8c..8c+7 of the block (codes, or the first 8 of the 16 bytes of bf16 values in xf, xf2).
template <int Act>
__device__ __forceinline__ void block_sums_mma(const Slot &s, uint2 xf, uint2 xf2, float (&d)[4])
{
#pragma unroll
    for (int i = 0; i < 4; i++)
        d[i] = 0.0f;
    if constexpr (Act == kActE4M3) {
#ifdef AS_FP8_MMA
        const uint32_t a[4] = {xf.x, 0u, xf.y, 0u};
        asfp8::mma_e4m3(d, a, s.w.x, s.w.y);
#else
        (void)s, (void)xf, (void)xf2;
#endif
    } else {
        const uint32_t a0[4] = {xf.x, 0u, xf.y, 0u}, a1[4] = {xf2.x, 0u, xf2.y, 0u};
        asmma::mma_bf16(d, a0, asfp8::e4m3x2_to_bf16x2(s.w.x, 0), asfp8::e4m3x2_to_bf16x2(s.w.x, 1));
        asmma::mma_bf16(d, a1, asfp8::e4m3x2_to_bf16x2(s.w.y, 0), asfp8::e4m3x2_to_bf16x2(s.w.y, 1));
    }
}

// The same sums computed by the lane alone: token row xrow's 32 activations of block kb (shared
// memory) against rows r0, r1 (the tile's rows 2c, 2c + 1), the products exact in f32, added in k order.
template <int Act>
__device__ __forceinline__ void block_sums_portable(const uint8_t *xrow, const uint8_t *w0, const uint8_t *w1, int kb,
                                                    float (&d)[4])
{
    d[0] = d[1] = d[2] = d[3] = 0.0f;
    if (!xrow)
        return;
    for (int k = 0; k < 32; k++) {
        float xv;
        if constexpr (Act == kActE4M3)
            xv = asfp8::e4m3_value(xrow[kb * 32 + k]);
        else
            xv = as_d_bf16_to_f32(((const uint16_t *)xrow)[kb * 32 + k]);
        d[0] = fmaf(xv, asfp8::e4m3_value(w0[kb * 32 + k]), d[0]);
        d[1] = fmaf(xv, asfp8::e4m3_value(w1[kb * 32 + k]), d[1]);
    }
}

// The group's first warp: sums the group's partials in warp order, then stores token g's rows o, o + 1
// (o = row0 + 2c) with the epilogues.
__device__ __forceinline__ void group_store(const Fp8GemvArgs &a, const float (*red)[64], int first, int w_warps,
                                            int64_t b, int row0)
{
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    float out[2] = {0.0f, 0.0f};
    for (int k = 0; k < w_warps; k++) {
        out[0] += red[first + k][2 * lane];
        out[1] += red[first + k][2 * lane + 1];
    }
    const int o = row0 + 2 * c;
    if (g >= a.m)
        return;
    const int64_t off = b * a.stride_y + (int64_t)g * a.ldy + o;
    if (a.y_f32) {
#pragma unroll
        for (int e = 0; e < 2; e++)
            if (o + e < a.n_out)
                ((float *)a.y)[off + e] = out[e];
        return;
    }
    uint16_t yv[2] = {as_d_f32_to_bf16(out[0]), as_d_f32_to_bf16(out[1])};
    if (a.rope.rd && o + 1 < a.n_out) { // o is even: (o, o + 1) is a pair when its channel is rotated
        const int ch = o % a.rope.hd - (a.rope.hd - a.rope.rd);
        const int p = a.rope.pos_d ? a.rope.pos_d[g] : a.rope.pos0 + g;
        if (ch >= 0 && p >= 0) {
            const int half = a.rope.rd / 2, k = ch / 2;
            const float cs = a.rope.cos_t[(int64_t)p * half + k], sn = a.rope.sin_t[(int64_t)p * half + k];
            as_d_rope_pair(yv[0], yv[1], cs, a.rope.inverse ? -sn : sn);
        }
    }
#pragma unroll
    for (int e = 0; e < 2; e++)
        if (o + e < a.n_out) {
            ((uint16_t *)a.y)[off + e] = yv[e];
            if (a.res)
                as_d_residual_store(a.res + (int64_t)g * a.ldres + o + e, yv[e]);
        }
}

template <int Act, bool Portable>
__global__ void __launch_bounds__(kThreads, 3) fp8_gemv_kernel(Fp8GemvArgs a, int w_warps)
{
    constexpr bool kMma = !Portable && (Act == kActBf16 || kE4m3Mma);
    __shared__ float red[2][kWarps][64]; // [tile parity][warp][token g * 8 + row]
    AS_DYNAMIC_SMEM(smem);               // the token rows of x (smem_bytes)
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    const int groups = kWarps / w_warps, group = warp / w_warps, wig = warp % w_warps;
    const int64_t b = blockIdx.y;
    const int nk = a.w.n_in >> 5, tiles = (a.n_out + 7) >> 3;
    const int kpw = wig < nk ? (nk - wig + w_warps - 1) / w_warps : 0; // this warp's k-blocks of a tile
    const int64_t rbase = b * a.w.stride_rows; // batch b's first row in W and its scales
    const uint8_t *Wb = a.w.w + rbase * a.w.ldw;
    const int64_t xrb = x_row_bytes(Act, a.w.n_in);
    const float *sxs = (const float *)(smem + a.m * xrb); // [m][nk]
    const uint8_t *xs = g < a.m ? smem + g * xrb : nullptr;      // token g's row, or none past m

    int tile = (int)blockIdx.x * groups + group;
    const int tstep = (int)gridDim.x * groups;
    const uint8_t *wrow = nullptr; // row g of the tile (clamped: loaded, never stored), bytes 8c..
    const float *wsr = nullptr;    // the tile's block-scale row
    auto point = [&](int t) {
        const int row = t * 8 + g < a.n_out ? t * 8 + g : a.n_out - 1;
        wrow = Wb + (int64_t)row * a.w.ldw + 8 * c;
        wsr = a.w.ws + ((rbase + 8 * t) >> 5) * a.w.ldws; // an 8-row tile at a multiple of 8: one 32-row block
    };
    Slot s[kRing];
    auto load = [&](Slot &sl, int j) {
        const int kb = wig + w_warps * j;
        sl.w = asfp8::ld_stream8(wrow + kb * 32);
        sl.ws = __ldg(wsr + kb);
    };
    bool loaded = tile < tiles; // the first tile's weights go out before the wait
    if (loaded) {
        point(tile);
#pragma unroll
        for (int u = 0; u < kRing; u++)
            if (u < kpw)
                load(s[u], u);
    }
    as_d_pdl_wait();
    // x's token rows into shared memory, 16 bytes a thread at a time (the previous kernel wrote them)
    {
        const int64_t row_bytes = Act == kActE4M3 ? a.w.n_in : 2 * (int64_t)a.w.n_in, chunks = row_bytes / 16;
        for (int64_t i = threadIdx.x; i < a.m * chunks; i += kThreads) {
            const int64_t t = i / chunks, ch = i % chunks;
            const uint8_t *src = Act == kActE4M3 ? a.xq + b * a.stride_xq + t * a.ldxq
                                                 : (const uint8_t *)(a.x + b * a.stride_x + t * a.ldx);
            *(uint4 *)(smem + t * xrb + 16 * ch) = __ldg((const uint4 *)(src + 16 * ch));
        }
        if constexpr (Act == kActE4M3)
            for (int i = threadIdx.x; i < a.m * nk; i += kThreads)
                ((float *)sxs)[i] = __ldg(a.sx + b * a.stride_sx + (int64_t)(i / nk) * a.ldsx + i % nk);
        __syncthreads();
    }

    for (int parity = 0; tile < tiles; tile += tstep, parity ^= 1) {
        point(tile);
        if (!loaded)
#pragma unroll
            for (int u = 0; u < kRing; u++)
                if (u < kpw)
                    load(s[u], u);
        loaded = false;
        const int r0 = min(tile * 8 + 2 * c, a.n_out - 1), r1 = min(tile * 8 + 2 * c + 1, a.n_out - 1);
        float acc[2] = {0.0f, 0.0f};
        for (int j0 = 0; j0 < kpw; j0 += kRing) {
#pragma unroll
            for (int u = 0; u < kRing; u++) {
                const int j = j0 + u, kb = wig + w_warps * j;
                if (j >= kpw)
                    break;
                float d[4];
                if constexpr (kMma) {
                    uint2 xf = make_uint2(0u, 0u), xf2 = make_uint2(0u, 0u);
                    if (xs) {
                        if constexpr (Act == kActE4M3) {
                            xf = *(const uint2 *)(xs + kb * 32 + 8 * c);
                        } else {
                            const uint4 v = *(const uint4 *)(xs + 2 * (kb * 32 + 8 * c));
                            xf = make_uint2(v.x, v.y), xf2 = make_uint2(v.z, v.w);
                        }
                    }
                    block_sums_mma<Act>(s[u], xf, xf2, d);
                } else {
                    block_sums_portable<Act>(xs, Wb + (int64_t)r0 * a.w.ldw, Wb + (int64_t)r1 * a.w.ldw, kb, d);
                }
                float sc = s[u].ws;
                if constexpr (Act == kActE4M3)
                    sc *= xs ? sxs[g * nk + kb] : 0.0f;
                acc[0] = fmaf(d[0], sc, acc[0]);
                acc[1] = fmaf(d[1], sc, acc[1]);
                if (j + kRing < kpw)
                    load(s[u], j + kRing);
            }
        }
        red[parity][warp][2 * lane] = acc[0];
        red[parity][warp][2 * lane + 1] = acc[1];
        if (w_warps > 1)
            asmma::bar_named(1 + group, 32 * w_warps);
        else
            __syncwarp();
        if (wig == 0)
            group_store(a, red[parity], warp, w_warps, b, tile * 8);
    }
    if (a.norm.ctr)
        as_d_gemv_norm_after(a);
}

#ifndef AS_EMU // host side (tools/emu runs the kernels above on the CPU)

// The most x staging a block may take (8 rows of 8192 codes and their scales: 72 KB).
constexpr int64_t kMaxSmem = 160 * 1024;

// Blocks of Kernel resident at once on the whole device with smem bytes of x each (the one-wave grid's
// cap). Not cached: the occupancy call is a host-side computation, and smem varies with m and n_in.
template <auto Kernel> int64_t resident_blocks(int64_t smem)
{
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, Kernel, kThreads, (size_t)smem) != cudaSuccess || n < 1)
        n = 1;
    return (int64_t)n * as_sm_count();
}

// Warps per group: doubled while the tiles' warps stay below what the device holds at once (24 an SM:
// 3 blocks of 8) and each warp keeps at least two k-blocks.
int pick_warps(int tiles, int nk, int batch)
{
    const int64_t target = (int64_t)as_sm_count() * 24;
    int w = 1;
    while (w < 8 && (int64_t)batch * tiles * w < target && nk >= 4 * w)
        w *= 2;
    return w;
}

template <int Act, bool Portable> int launch(const Fp8GemvArgs &a, int batch, int w_warps, int room, cudaStream_t st)
{
    constexpr auto K = fp8_gemv_kernel<Act, Portable>;
    const int64_t smem = smem_bytes(Act, a.m, a.w.n_in);
    if (smem > kMaxSmem)
        return (int)cudaErrorInvalidValue;
    // opted in whatever smem is: the kernel's static reduction buffer counts against the same 48 KiB
    const int rc = as_allow_dynamic_smem<K>((int)kMaxSmem);
    if (rc)
        return rc;
    const int groups = kWarps / w_warps, tiles = (a.n_out + 7) / 8;
    const int64_t sets = (tiles + groups - 1) / groups;
    const int64_t cap = (resident_blocks<K>(smem) - room) / batch;
    const int grid = (int)(sets < cap ? sets : cap > 0 ? cap : 1);
    as_launch(K, dim3((unsigned)grid, (unsigned)batch), kThreads, (size_t)smem, st, a, w_warps);
    return AS_LAUNCH_RESULT();
}

// Wn = 0: pick_warps; portable: the lanes' own sums (the tests' check of that path). Returns
// cudaErrorInvalidValue for sizes or alignments the kernel cannot take.
int fp8_gemv_launch(const Fp8GemvArgs &a, int act, int Wn, int portable, int room, cudaStream_t st)
{
    const AsFp8Weight &w = a.w;
    const int batch = w.batch;
    if (a.n_out < 0 || w.n_in < 0 || a.m < 0 || a.m > 8 || batch < 0 || room < 0)
        return (int)cudaErrorInvalidValue;
    if (a.n_out == 0 || a.m == 0 || batch == 0)
        return 0;
    const int nk = w.n_in / 32;
    if (w.n_in == 0 || w.n_in % 32 || !w.w || !w.ws || w.ldw < w.n_in || w.ldw % 8 || ((uintptr_t)w.w & 7) ||
        w.ldws < nk || a.ldy < a.n_out || !a.y || batch > 65535)
        return (int)cudaErrorInvalidValue;
    if (batch > 1 && (w.stride_rows % 8 || w.stride_rows < w.n_out || a.stride_y < 0))
        return (int)cudaErrorInvalidValue;
    if (act == kActE4M3 && (!a.xq || !a.sx || !as_aligned16(a.xq) || a.ldxq % 16 || a.ldxq < w.n_in ||
                            a.ldsx < nk || (batch > 1 && (a.stride_xq % 16 || a.stride_xq < 0 || a.stride_sx < 0))))
        return (int)cudaErrorInvalidValue;
    if (act == kActBf16 && (!a.x || !as_aligned16(a.x) || a.ldx % 8 || a.ldx < w.n_in ||
                            (batch > 1 && (a.stride_x % 8 || a.stride_x < 0))))
        return (int)cudaErrorInvalidValue;
    if ((a.res || a.rope.rd || a.norm.ctr) && (batch != 1 || a.y_f32))
        return (int)cudaErrorInvalidValue;
    if (a.norm.ctr && (a.m != 1 || !a.norm.w || !a.norm.y || a.n_out > kRmsCached * kRmsThreads))
        return (int)cudaErrorInvalidValue;
    if (Wn != 0 && Wn != 1 && Wn != 2 && Wn != 4 && Wn != 8)
        return (int)cudaErrorInvalidValue;
    const int ww = Wn ? Wn : pick_warps((a.n_out + 7) / 8, nk, batch);
    if (act == kActE4M3)
        return portable ? launch<kActE4M3, true>(a, batch, ww, room, st) : launch<kActE4M3, false>(a, batch, ww, room, st);
    return portable ? launch<kActBf16, true>(a, batch, ww, room, st) : launch<kActBf16, false>(a, batch, ww, room, st);
}

Fp8GemvArgs args_fp8(const AsFp8Weight *w, const AsFp8Act *x, int m, void *y, int64_t ldy, int64_t stride_y, int y_f32)
{
    Fp8GemvArgs a{};
    a.w = *w;
    a.xq = x->q, a.ldxq = x->ldq, a.stride_xq = x->stride_q;
    a.sx = x->s, a.ldsx = x->lds, a.stride_sx = x->stride_s;
    a.n_out = w->n_out, a.m = m;
    a.y = y, a.ldy = ldy, a.stride_y = stride_y, a.y_f32 = y_f32 ? 1 : 0;
    return a;
}

#endif // AS_EMU
} // namespace
#ifndef AS_EMU

// Explicit warps per group (0: automatic) and the portable path, for the tests and the micro-benchmark;
// not part of kernels.h. x: act_quant's codes (AsFp8Act) or, with xb, bf16 activations (rows ldx apart).
extern "C" int as_k_fp8_gemv_cfg(const AsFp8Weight *w, const AsFp8Act *x, const as_bf16_t *xb, int64_t ldx,
                                 int64_t stride_x, int m, void *y, int64_t ldy, int64_t stride_y, int y_f32, int Wn,
                                 int portable, cudaStream_t st)
{
    if (!w || (!x && !xb))
        return (int)cudaErrorInvalidValue;
    const AsFp8Act none = {};
    Fp8GemvArgs a = args_fp8(w, x ? x : &none, m, y, ldy, stride_y, y_f32);
    if (!x) {
        a.x = xb, a.ldx = ldx, a.stride_x = stride_x;
        return fp8_gemv_launch(a, kActBf16, Wn, portable, 0, st);
    }
    return fp8_gemv_launch(a, kActE4M3, Wn, portable, 0, st);
}

extern "C" int as_k_fp8_gemv_warps(int n_out, int n_in, int batch) { return pick_warps((n_out + 7) / 8, n_in / 32, batch); }

extern "C" int as_k_fp8_gemv(const AsFp8Weight *w, const AsFp8Act *x, int m, void *y, int64_t ldy, int64_t stride_y,
                             int y_f32, cudaStream_t st)
{
    return as_k_fp8_gemv_cfg(w, x, nullptr, 0, 0, m, y, ldy, stride_y, y_f32, 0, 0, st);
}

extern "C" int as_k_fp8_gemv_bf16x(const AsFp8Weight *w, const as_bf16_t *x, int64_t ldx, int64_t stride_x, int m,
                                   as_bf16_t *y, int64_t ldy, int64_t stride_y, cudaStream_t st)
{
    if (!x)
        return (int)cudaErrorInvalidValue;
    return as_k_fp8_gemv_cfg(w, nullptr, x, ldx, stride_x, m, y, ldy, stride_y, 0, 0, 0, st);
}

extern "C" int as_k_fp8_gemv_residual(const AsFp8Weight *w, const AsFp8Act *x, int m, as_bf16_t *y, int64_t ldy,
                                      as_bf16_t *h, int64_t ldh, cudaStream_t st)
{
    if (!w || !x || !h || ldh < w->n_out)
        return (int)cudaErrorInvalidValue;
    Fp8GemvArgs a = args_fp8(w, x, m, y, ldy, 0, 0);
    a.res = h, a.ldres = ldh;
    return fp8_gemv_launch(a, kActE4M3, 0, 0, 0, st);
}

extern "C" int as_k_fp8_gemv_rope(const AsFp8Weight *w, const AsFp8Act *x, int m, as_bf16_t *y, int64_t ldy, int heads,
                                  int hd, int rd, int pos0, const int32_t *pos, const float *cos_t, const float *sin_t,
                                  int inverse, int room, cudaStream_t st)
{
    // as_k_rope's refusals, and the rotated rows must be the GEMV's outputs, pairs of rows (hd even)
    if (!w || !x || !as_rope_shape_ok(m, heads, hd, rd, pos0, pos) || hd % 2 || (int64_t)heads * hd != w->n_out ||
        !cos_t || !sin_t || room < 0)
        return (int)cudaErrorInvalidValue;
    Fp8GemvArgs a = args_fp8(w, x, m, y, ldy, 0, 0);
    a.rope = AsDRope{cos_t, sin_t, hd, rd, pos0, pos, inverse ? 1 : 0};
    return fp8_gemv_launch(a, kActE4M3, 0, 0, room, st);
}

extern "C" int as_k_fp8_gemv_norm(const AsFp8Weight *w, const AsFp8Act *x, as_bf16_t *y, as_bf16_t *h,
                                  const float *norm_w, float eps, as_bf16_t *y_norm, unsigned *ctr, cudaStream_t st)
{
    if (!w || !x || !norm_w || !y_norm || !ctr || w->n_out <= 0)
        return (int)cudaErrorInvalidValue;
    if (w->n_out > kRmsCached * kRmsThreads) { // too long to cache: the GEMV, then rmsnorm.cu
        const int rc = h ? as_k_fp8_gemv_residual(w, x, 1, y, w->n_out, h, w->n_out, st)
                         : as_k_fp8_gemv(w, x, 1, y, w->n_out, 0, 0, st);
        return rc ? rc : as_k_rmsnorm(h ? h : y, w->n_out, norm_w, y_norm, w->n_out, 1, w->n_out, eps, st);
    }
    Fp8GemvArgs a = args_fp8(w, x, 1, y, w->n_out, 0, 0);
    a.res = h, a.ldres = w->n_out;
    a.norm = {norm_w, y_norm, eps, ctr};
    return fp8_gemv_launch(a, kActE4M3, 0, 0, 0, st);
}
#endif // AS_EMU
