// Sparse attention with the attention sink (SPEC 3 step 7; twin: as_sparse_attention in
// ref/attention.c; test: tests/gpu_sparse_attn.c): kernel.py's sparse_attn, per query t and head h,
//
//   z_j = (q[t][h] . row_j) * scale for the selection entries j < topk (row_j: idx[t][j] < na reads
//         rows_a, else rows_b[idx - na]; an entry < 0 or >= na + nb is skipped: z_j = -inf)
//   over the blocks of 64 consecutive entries (asattn::kBlock; entry j is in block j / 64), from
//   m = -1e30, den = 0, acc = 0 (f32):
//     m' = max(m, max_j z_j);  c = exp(m - m');  p_j = exp(z_j - m')
//     den = den c + sum_j p_j   (the f32 p)      acc = acc c + sum_j bf16(p_j) row_j   (p rounded)
//     m = m'
//   den += exp(sink[h] - m) (the sink is not part of the running max); o[t][h] = bf16(acc / den)
//   (nothing selected: o = 0; here acc times the reciprocal of den, within an f32 ulp of the quotient).
// bf16(p) is rounded against the running max after its own block, so the block boundaries (entries
// 0, 64, 128, ...) are part of the result: every kernel here takes the selection in those blocks.
//
// The selection is per query and shared by all heads (one latent row is K and V of every head),
// so a block takes one query t and 64 heads: S = Q R^T and O += P R are matrix products over all
// 64 heads with the same gathered rows.
//
// Fast path (nh % 16 == 0, hd in {64, 128, 256, 512}, 16-byte aligned tensors): flash-attention
// style on tensor cores (mma.sync m16n8k16, bf16 in, f32 accumulate), one tile of 64 gathered rows
// per softmax block (the block's max is taken over all its 64 z before any p).
//   grid (s, nsplit, ceil(nh / 64)); block 256 threads = 8 warps.
//   warp w: head group hg = w % 4 (16 heads), hd half hf = w / 4.
//   shared memory: Q [64][hd] (loaded once), 2 stages of gathered rows [64][hd] (cp.async, the next
//     tile in flight while one is computed; rows with a skipped index are zero-filled and masked),
//     both XOR-swizzled by 16-byte chunk (chunk ^ (row & 7)) so every ldmatrix is conflict-free; five
//     512-byte swap slots per warp; the split's selection entries, validated once (at most
//     kMaxSplitTiles tiles: wider selections always split). hd 512: 220 KB, 1 block per SM.
//   per tile, warp (hg, hf), the pair (hg, 0) and (hg, 1) swapping through shared memory:
//     S over its hd half, Q[hg heads][hf half] . R[:, hf half]^T, 32 rows at a time: the partner's
//       rows first, handed over, then its own (rows 32 hf .. 32 hf + 31) plus the partner's partial
//       of them, z = S * scale (16 accumulators live, not the 32 of all 64 rows: at hd 512 O's 128
//       leave no room for those);
//     the block's softmax step per head (above): the two halves' row maxima swapped, so both warps
//       hold the same m' and c; p of its own rows and their part of the f32 row sums; bf16(P) of its
//       rows as the A fragments of the O product, swapped;
//     O[hg heads][hf half] = O c + bf16(P) . R[:, hf half] (a warp none of whose rows' max moved skips
//       the rescale: c = 1, the same bits).
//   end: den = l + exp(sink - m), o = O * (1 / den), staged as bf16 in the Q buffer and written with
//     coalesced 16-byte stores.
// Split over the selection (flash-decoding) when s * ceil(nh / 64) blocks cannot fill the device:
//   a split is whole tiles, so every block inside it is kernel.py's; it starts from m = -1e30 and
//   rounds its bf16(p) against its own running max, not the one the whole selection would have
//   reached there (an accepted deviation from kernel.py, docs/ENGINE.md). Each split writes its
//   unnormalised O, m and l (f32) to a stream-ordered workspace (cudaMallocAsync / cudaFreeAsync on
//   the caller's stream) and sparse_attn_combine_kernel folds them: M = max_j m_j (the sink left
//   out), den = sum_j l_j exp(m_j - M) + exp(sink - M), o = bf16(sum_j exp(m_j - M) O_j / den). Where
//   the workspace cannot be had, one split is used (kernel.py's result itself).
// Other geometries (tiny: nh 4, hd 64; any nh, 1 <= hd <= 512) take sparse_attn_warp_kernel: one
//   warp per (t, h), the same blocks in f32 (each row read twice: its z, then its weighted sum).
// Decode graph: as_k_sparse_attn_decode takes the live selection width and compressed row
//   count from device memory (AttnArgs.topk_d / nb_d) and launches for topk_max: split as a one-query
//   launch at topk_max (one tile per split on a 132-SM device), splits past the live ones return at once, a
//   single live split finalises in place, the combine folds the live splits only; the workspace is the
//   caller's (no allocation in a captured graph). At the live width it computes what as_k_sparse_attn
//   computes whenever both split one tile per split (as_k_sparse_attn_decode_plan reports it).
// Prefill on sm_90 (hd 512, s x head blocks >= #SMs): kernels/sparse_attn_wgmma.cu, the same math on
//   warpgroup MMA.
// Paths (AS_K_ATTN_*, the engine's --attn-path): automatic, or one kernel forced for diagnosis; "mma" and
//   "wgmma" fail (cudaErrorInvalidValue) where their kernel does not apply (decode keeps its own choice
//   under "wgmma").
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/mma.cuh"
#include "kernels/sparse_attn_args.cuh"

namespace {

using namespace asmma;
using asattn::attn_den;
using asattn::attn_inv;
using asattn::kMaxInit;

constexpr int kThreads = 256;
constexpr int kHB = 64;               // heads per block
constexpr int kTR = asattn::kBlock;   // selected rows per tile: one softmax block
constexpr int kStages = 2;            // cp.async stages
constexpr int kMaxSplitTiles = 32;    // selection entries of one split (32 x 64 = 2048) staged in shared memory
constexpr float kLog2e = 1.4426950408889634f;

template <int HD> struct AttnSmem {
    static constexpr int kQBytes = kHB * HD * 2;
    static constexpr int kRBytes = kTR * HD * 2;               // one stage
    static constexpr int kXBytes = 8 * 5 * 32 * 16;            // 8 warps x 5 slots x 32 lanes x float4
    static constexpr int kIdxBytes = kMaxSplitTiles * kTR * 4; // the split's row indices (-1: skipped)
    static constexpr int kBytes = kQBytes + kStages * kRBytes + kXBytes + kIdxBytes;
};
static_assert(AttnSmem<512>::kBytes <= 227 * 1024, "an sm_90 block's shared memory");

// Byte offset of 16-byte chunk `ch` of row `row` in a swizzled [rows][HD] bf16 tile.
template <int HD> __device__ __forceinline__ uint32_t swz(int row, int ch)
{
    return (uint32_t)(row * (HD * 2) + ((ch ^ (row & 7)) << 4));
}

using asattn::AttnArgs;

// The live selection width and row count of a launch (by value, or read on the device).
__device__ __forceinline__ int live_topk(const AttnArgs &a)
{
    return a.topk_d ? min(a.topk, max(0, *a.topk_d)) : a.topk;
}
__device__ __forceinline__ int64_t live_nrows(const AttnArgs &a)
{
    return (int64_t)a.na + (a.nb_d ? min(a.nb, max(0, *a.nb_d)) : a.nb);
}

template <int HD>
__global__ void __launch_bounds__(kThreads, 1) sparse_attn_mma_kernel(AttnArgs a)
{
    as_d_pdl_wait();
    using SM = AttnSmem<HD>;
    constexpr int HH = HD / 2;   // hd half of a warp
    constexpr int CPR = HD / 8;  // 16-byte chunks per row
    constexpr int KS = HH / 16;  // k-steps of S (over the hd half)
    constexpr int NO = HH / 8;   // n-tiles of O (over the hd half)
    static_assert(HD % 64 == 0 && HD <= 512, "hd must be 64, 128, 256 or 512");
    static_assert((kTR * CPR) % kThreads == 0 && (kHB * CPR) % kThreads == 0, "tile chunks split evenly");

    extern __shared__ __align__(128) uint8_t smem[];
    uint8_t *sq = smem;                                                  // Q, later the bf16 output
    uint8_t *sr = smem + SM::kQBytes;                                    // [kStages][kTR][HD]
    float4 *sx = (float4 *)(smem + SM::kQBytes + kStages * SM::kRBytes); // [8 warps][5 slots][32 lanes]
    int *sidx = (int *)(smem + SM::kQBytes + kStages * SM::kRBytes + SM::kXBytes);   // [ntiles * kTR]

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, c4 = lane & 3;
    const int hg = warp & 3, hf = warp >> 2;
    const int t = blockIdx.x, split = blockIdx.y, nsplit = gridDim.y;
    const int h0 = blockIdx.z * kHB; // first head of the block
    const int64_t nrows = live_nrows(a);
    const int topk = live_topk(a);
    const int ntiles_all = (topk + kTR - 1) / kTR;
    // Splits holding a live tile (every split when topk is by value). With a device topk, the splits
    // past the live ones have nothing to do, and a single live split finalises in place, as the
    // by-value launch of that width (one split, no workspace) does.
    const int nsplit_live = a.topk_d ? (ntiles_all + a.tiles_per_split - 1) / a.tiles_per_split : nsplit;
    if (split > 0 && split >= nsplit_live)
        return; // uniform over the block, before any barrier
    const bool to_ws = a.ws_o && nsplit_live > 1;
    const int tile_a = split * a.tiles_per_split;
    const int tile_b = min(ntiles_all, tile_a + a.tiles_per_split);
    const int ntiles = max(0, tile_b - tile_a);

    // Q[h0 .. h0 + 64) of token t (heads >= nh are zero), in flight while the indices load.
    {
        const uint16_t *qt = a.q + ((int64_t)t * a.nh + h0) * HD;
#pragma unroll
        for (int i = 0; i < kHB * CPR / kThreads; i++) {
            int id = tid + i * kThreads, r = id / CPR, ch = id % CPR;
            bool ok = h0 + r < a.nh;
            cp_async16(smem_u32(sq + swz<HD>(r, ch)), ok ? qt + (int64_t)r * HD + ch * 8 : a.q, ok ? 16 : 0);
        }
    }
    // The split's selection entries, validated once: a row index, or -1 (skipped / past topk).
    {
        const int32_t *sel = a.idx + (int64_t)t * a.topk + (int64_t)tile_a * kTR; // rows a.topk apart
        const int n = ntiles * kTR, avail = topk - tile_a * kTR;
        for (int i = tid; i < n; i += kThreads) {
            const int64_t v = i < avail ? (int64_t)sel[i] : -1;
            sidx[i] = v >= 0 && v < nrows ? (int)v : -1;
        }
    }
    __syncthreads(); // sidx visible to every thread
    // Tile `it` of the split (local index) into `stage`.
    auto load_tile = [&](int it, int stage) {
        uint8_t *dst = sr + stage * SM::kRBytes;
#pragma unroll
        for (int i = 0; i < kTR * CPR / kThreads; i++) {
            int id = tid + i * kThreads, r = id / CPR, ch = id % CPR;
            const int64_t v = sidx[it * kTR + r];
            const uint16_t *src = a.q; // any valid address: nothing is read for a skipped row
            if (v >= 0)
                src = (v < a.na ? a.rows_a + v * HD : a.rows_b + (v - a.na) * HD) + ch * 8;
            cp_async16(smem_u32(dst + swz<HD>(r, ch)), src, v >= 0 ? 16 : 0);
        }
    };
    // Prologue: one group, Q + tile 0.
    if (ntiles > 0)
        load_tile(0, 0);
    cp_async_commit();

    float acc_o[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            acc_o[n][e] = 0.0f;
    float m_run[2] = {kMaxInit, kMaxInit}; // rows g, g + 8 (heads hg*16 + g, + 8)
    float l_run[2] = {0.0f, 0.0f};         // this thread's part of the row sums

    // ldmatrix lane addressing (see kernels/mma.cuh for the fragment layouts).
    //   A (Q, 16 x 16): matrix lane>>3: rows (lane & 7) + 8 * ((lane >> 3) & 1), k + 8 * (lane >> 4)
    //   B for S (R rows as n, hd as k): rows (lane & 7) + 8 * (lane >> 4), k + 8 * ((lane >> 3) & 1)
    //   B for PV (R rows as k, hd as n, .trans): rows (lane & 7) + 8 * ((lane >> 3) & 1), n + 8 * (lane >> 4)
    const int a_row = hg * 16 + (lane & 7) + 8 * ((lane >> 3) & 1), a_kc = lane >> 4;
    const int bs_row = (lane & 7) + 8 * (lane >> 4), bs_kc = (lane >> 3) & 1;
    const int bv_row = (lane & 7) + 8 * ((lane >> 3) & 1), bv_nc = lane >> 4;
    const int hc0 = hf * (HH / 8); // first 16-byte chunk of this warp's hd half
    // Chunk hc0 + 2 j + kc of a row r of a fragment load, swizzled (^ r & 7; every row above has
    // r & 7 = lane & 7): the xor touches the chunk's low 3 bits, which repeat every 4 steps j, so four
    // per-lane offsets serve every unrolled step (one register a step otherwise).
    uint32_t lo_a[4], lo_s[4], lo_v[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        lo_a[j] = (uint32_t)((((hc0 & 7) + 2 * j + a_kc) ^ (lane & 7)) << 4);
        lo_s[j] = (uint32_t)((((hc0 & 7) + 2 * j + bs_kc) ^ (lane & 7)) << 4);
        lo_v[j] = (uint32_t)((((hc0 & 7) + 2 * j + bv_nc) ^ (lane & 7)) << 4);
    }
    auto chunk_off = [&](const uint32_t(&lo)[4], int j) {
        return (uint32_t)((hc0 & ~7) * 16 + 128 * (j >> 2)) + lo[j & 3];
    };
    const uint8_t *qa = sq + a_row * (HD * 2);
    // The pair (hg, 0), (hg, 1) swaps through its slots: each warp writes its own five and reads the
    // partner's (slots 0-3: partial S, then slots 0-1: bf16 P; slot 4: row maxima; after the loop
    // slot 0: row sums).
    float4 *xmine = sx + warp * 5 * 32 + lane;
    const float4 *xtheirs = sx + (warp ^ 4) * 5 * 32 + lane;
    const int own = 4 * hf; // the n-tiles (8 rows each) this warp exponentiates: rows 32 hf .. 32 hf + 31

    for (int it = 0; it < ntiles; it++) {
        const int stage = it & 1;
        cp_async_wait<0>();
        __syncthreads(); // tile `it` (and Q) landed; everyone is done with tile it - 1 and the slots
        if (it + 1 < ntiles)
            load_tile(it + 1, stage ^ 1);
        cp_async_commit();

        const uint8_t *rt = sr + stage * SM::kRBytes;
        // ---- S_half = Q[hg][hf] . R[rows 8 n0 .. 8 n0 + 31, hf]^T: 16 heads x 32 rows, into s
        float s[4][4];
        auto s_half = [&](int n0) {
            const uint8_t *rb = rt + n0 * 8 * (HD * 2); // row 8 n0 (a multiple of 8: the same swizzle)
#pragma unroll
            for (int n = 0; n < 4; n++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    s[n][e] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < KS; ks++) {
                uint32_t af[4];
                ldmatrix_x4(af[0], af[1], af[2], af[3], smem_u32(qa + chunk_off(lo_a, ks)));
#pragma unroll
                for (int np = 0; np < 2; np++) {
                    uint32_t b0, b1, b2, b3;
                    ldmatrix_x4(b0, b1, b2, b3, smem_u32(rb + (np * 16 + bs_row) * (HD * 2) + chunk_off(lo_s, ks)));
                    mma_bf16(s[2 * np], af, b0, b1);
                    mma_bf16(s[2 * np + 1], af, b2, b3);
                }
            }
        };
        // the partner's 32 rows first, handed over; then this warp's, plus the partner's partial of them:
        // S over the whole hd (z = S * scale, or -inf for a skipped row)
        s_half(4 - own);
#pragma unroll
        for (int n = 0; n < 4; n++)
            xmine[n * 32] = make_float4(s[n][0], s[n][1], s[n][2], s[n][3]);
        s_half(own);
        bar_named(1 + hg, 64);
        const int *valid = sidx + it * kTR + 8 * own; // >= 0: a selected row
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int n = 0; n < 4; n++) {
            const float4 o4 = xtheirs[n * 32];
            const bool v0 = valid[n * 8 + 2 * c4] >= 0, v1 = valid[n * 8 + 2 * c4 + 1] >= 0;
            s[n][0] = v0 ? (s[n][0] + o4.x) * a.scale : -INFINITY;
            s[n][1] = v1 ? (s[n][1] + o4.y) * a.scale : -INFINITY;
            s[n][2] = v0 ? (s[n][2] + o4.z) * a.scale : -INFINITY;
            s[n][3] = v1 ? (s[n][3] + o4.w) * a.scale : -INFINITY;
            mx[0] = fmaxf(mx[0], fmaxf(s[n][0], s[n][1]));
            mx[1] = fmaxf(mx[1], fmaxf(s[n][2], s[n][3]));
        }
        // ---- the block's softmax step, rows g (e = 0, 1) and g + 8 (e = 2, 3): m' over all 64 rows (the
        // maxima of the two halves swapped: both warps of the pair then hold the same m and c)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        }
        xmine[4 * 32] = make_float4(mx[0], mx[1], 0.0f, 0.0f);
        bar_named(1 + hg, 64);
        float alpha[2];
        {
            const float4 om = xtheirs[4 * 32];
            const float mt[2] = {om.x, om.y};
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const float m_new = fmaxf(m_run[r], fmaxf(mx[r], mt[r])); // >= -1e30: finite
                alpha[r] = m_new == m_run[r] ? 1.0f : exp2f((m_run[r] - m_new) * kLog2e);
                m_run[r] = m_new;
            }
        }
#pragma unroll
        for (int n = 0; n < 4; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                s[n][e] = exp2f((s[n][e] - m_run[e >> 1]) * kLog2e); // -inf -> 0
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float ls = 0.0f;
#pragma unroll
            for (int n = 0; n < 4; n++)
                ls += s[n][2 * r] + s[n][2 * r + 1];
            l_run[r] = l_run[r] * alpha[r] + ls;
        }
        // ---- bf16(P) as the A fragments of the O product, k-steps 2 hf, 2 hf + 1 into this warp's slots 0-1
        // (its partials there were read by the partner before the maxima's barrier); the O product reads
        // each k-step's fragment back from the slots of the warp that made it
#pragma unroll
        for (int k = 0; k < 2; k++) // rows g, g + 8 at rows 16 k + 2 c4 (+1), then 16 k + 8 + 2 c4 (+1)
            ((uint4 *)xmine)[k * 32] =
                make_uint4(pack_bf16x2(s[2 * k][0], s[2 * k][1]), pack_bf16x2(s[2 * k][2], s[2 * k][3]),
                           pack_bf16x2(s[2 * k + 1][0], s[2 * k + 1][1]),
                           pack_bf16x2(s[2 * k + 1][2], s[2 * k + 1][3]));
        bar_named(1 + hg, 64);
        if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
            for (int n = 0; n < NO; n++) {
                acc_o[n][0] *= alpha[0];
                acc_o[n][1] *= alpha[0];
                acc_o[n][2] *= alpha[1];
                acc_o[n][3] *= alpha[1];
            }
        }
        // ---- O += bf16(P) . R[:, hf]: K = 64 rows (four k-steps), N = hd half
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            const uint4 v = ((const uint4 *)((kk >> 1) == hf ? xmine : xtheirs))[(kk & 1) * 32];
            const uint32_t pf[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int dp = 0; dp < NO / 2; dp++) {
                uint32_t b0, b1, b2, b3;
                ldmatrix_x4_trans(b0, b1, b2, b3,
                                  smem_u32(rt + (kk * 16 + bv_row) * (HD * 2) + chunk_off(lo_v, dp)));
                mma_bf16(acc_o[2 * dp], pf, b0, b1);
                mma_bf16(acc_o[2 * dp + 1], pf, b2, b3);
            }
        }
    }
    cp_async_wait<0>();

    // Row sums: over the quad, then this warp's rows plus the partner's (own + other: the same bits in
    // both, addition commutes).
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
    }
    __syncthreads(); // every slot of the last tile is read
    xmine[0] = make_float4(l_run[0], l_run[1], 0.0f, 0.0f);
    __syncthreads();
    {
        const float4 ol = xtheirs[0];
        l_run[0] += ol.x;
        l_run[1] += ol.y;
    }
    const int hl[2] = {hg * 16 + g, hg * 16 + g + 8}; // local heads of rows g, g + 8

    if (to_ws) { // one split of several: unnormalised O, m, l
        const int64_t base = ((int64_t)t * nsplit + split) * a.nh;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int h = h0 + hl[r];
            if (h >= a.nh)
                continue;
            float *dst = a.ws_o + (base + h) * HD + hf * HH + 2 * c4;
#pragma unroll
            for (int n = 0; n < NO; n++)
                *(float2 *)(dst + n * 8) = make_float2(acc_o[n][2 * r], acc_o[n][2 * r + 1]);
            if (hf == 0 && c4 == 0)
                *(float2 *)(a.ws_ml + (base + h) * 2) = make_float2(m_run[r], l_run[r]);
        }
        return;
    }

    // One split: the sink into the denominator, o = O / den staged as bf16 rows in the Q buffer,
    // coalesced stores.
    float inv[2]; // 1 / den
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int h = h0 + hl[r];
        inv[r] = attn_inv(attn_den(l_run[r], m_run[r], h < a.nh ? a.sink[h] : 0.0f));
    }
    __syncthreads(); // every warp is done reading Q
#pragma unroll
    for (int r = 0; r < 2; r++) {
#pragma unroll
        for (int n = 0; n < NO; n++) {
            const int col = hf * HH + n * 8 + 2 * c4;
            *(uint32_t *)(sq + swz<HD>(hl[r], col >> 3) + (col & 7) * 2) =
                pack_bf16x2(acc_o[n][2 * r] * inv[r], acc_o[n][2 * r + 1] * inv[r]);
        }
    }
    __syncthreads();
    uint16_t *ot = a.o + ((int64_t)t * a.nh + h0) * HD;
#pragma unroll
    for (int i = 0; i < kHB * CPR / kThreads; i++) {
        int id = tid + i * kThreads, r = id / CPR, ch = id % CPR;
        if (h0 + r < a.nh)
            *(uint4 *)(ot + (int64_t)r * HD + ch * 8) = *(const uint4 *)(sq + swz<HD>(r, ch));
    }
}

// Folds the splits and the sink: one block of kCombineThreads per (t, h), a thread for channels
// threadIdx.x + kCombineThreads k. The workspace holds nsplit splits per (t, h); with topk_d (the
// decode variant) only the live ones are folded (ceil(ceil(topk / 64) / tps) of them, topk =
// min(*topk_d, topk_max)), and nothing is done when one split was live (it finalised in place).
//   M = max_j m_j (the sink left out, as in the splits), f_j = exp(m_j - M),
//   den = sum_j l_j f_j + exp(sink - M), o = bf16(sum_j f_j O_j / den)   (split order throughout;
//   every thread takes M, f_j and den itself, the same bits in each).
// A split without a selected row has m_j = -1e30, l_j = 0, O_j = 0: f_j is 0, or 1 when every split
// is empty (M = -1e30; then den = exp(sink + 1e30) and o = 0).
constexpr int kCombineThreads = 128;
__global__ void __launch_bounds__(kCombineThreads)
    sparse_attn_combine_kernel(const float *__restrict__ ws_o, const float *__restrict__ ws_ml,
                               const float *__restrict__ sink, uint16_t *__restrict__ o, int nh, int hd, int nsplit,
                               const int32_t *topk_d = nullptr, int topk_max = 0, int tps = 1)
{
    as_d_pdl_wait();
    constexpr int kPer = 512 / kCombineThreads; // channels a thread (hd <= 512)
    const int t = blockIdx.x, h = blockIdx.y;
    int count = nsplit;
    if (topk_d) {
        const int topk = min(topk_max, max(0, *topk_d));
        count = ((topk + kTR - 1) / kTR + tps - 1) / tps;
        if (count <= 1)
            return;
    }
    const int64_t row0 = (int64_t)t * nsplit * nh + h; // split j's: row0 + j nh
    float M = kMaxInit;
    for (int j = 0; j < count; j++)
        M = fmaxf(M, ws_ml[(row0 + (int64_t)j * nh) * 2]);
    float l = 0.0f, acc[kPer];
#pragma unroll
    for (int k = 0; k < kPer; k++)
        acc[k] = 0.0f;
    for (int j = 0; j < count; j++) {
        const int64_t row = row0 + (int64_t)j * nh;
        const float2 ml = *(const float2 *)(ws_ml + row * 2);
        const float f = as_d_expf(ml.x - M);
        if (f == 0.0f)
            continue;
        l += ml.y * f;
#pragma unroll
        for (int k = 0; k < kPer; k++) {
            const int d = threadIdx.x + kCombineThreads * k;
            if (d < hd)
                acc[k] = fmaf(ws_o[row * hd + d], f, acc[k]);
        }
    }
    const float inv = attn_inv(attn_den(l, M, sink[h]));
    uint16_t *dst = o + ((int64_t)t * nh + h) * hd;
#pragma unroll
    for (int k = 0; k < kPer; k++) {
        const int d = threadIdx.x + kCombineThreads * k;
        if (d < hd)
            dst[d] = as_d_f32_to_bf16(acc[k] * inv);
    }
}

// Any geometry with hd <= 512: one warp per (t, h); lane l holds channels l + 32 e. A block of 64
// entries in two passes over its rows: the z of every entry (lane j % 32 keeps entry j's), then, with
// the block's max known, each lane's two weights, and the rows weighted by them.
constexpr int kWarpE = 16;
__global__ void __launch_bounds__(128) sparse_attn_warp_kernel(AttnArgs a, int s, int hd)
{
    as_d_pdl_wait();
    const int lane = threadIdx.x & 31;
    const int64_t pair = (int64_t)blockIdx.x * 4 + (threadIdx.x >> 5);
    if (pair >= (int64_t)s * a.nh)
        return;
    const int t = (int)(pair / a.nh), h = (int)(pair % a.nh);
    const int64_t nrows = live_nrows(a);
    const int topk = live_topk(a);
    const uint16_t *qh = a.q + pair * hd;
    float qv[kWarpE], ov[kWarpE];
#pragma unroll
    for (int e = 0; e < kWarpE; e++) {
        const int d = lane + 32 * e;
        qv[e] = d < hd ? as_d_bf16_to_f32(qh[d]) : 0.0f;
        ov[e] = 0.0f;
    }
    float m = kMaxInit, l = 0.0f;
    const int32_t *sel = a.idx + (int64_t)t * a.topk; // rows a.topk apart
    auto row_of = [&](int j) -> const uint16_t * {     // entry j's row, or null (skipped)
        const int64_t v = sel[j];
        if (v < 0 || v >= nrows)
            return nullptr;
        return v < a.na ? a.rows_a + v * hd : a.rows_b + (v - a.na) * hd;
    };
    for (int j0 = 0; j0 < topk; j0 += kTR) {
        const int nj = min(kTR, topk - j0);
        float zk[2] = {-INFINITY, -INFINITY}; // lane l: entries j0 + l, j0 + 32 + l
        float mx = -INFINITY;
        for (int jj = 0; jj < nj; jj++) {
            const uint16_t *row = row_of(j0 + jj);
            if (!row)
                continue;
            float part = 0.0f;
#pragma unroll
            for (int e = 0; e < kWarpE; e++) {
                const int d = lane + 32 * e;
                part = fmaf(qv[e], d < hd ? as_d_bf16_to_f32(row[d]) : 0.0f, part);
            }
            const float z = as_d_warp_sum(part) * a.scale;
            mx = fmaxf(mx, z);
            if (lane == (jj & 31)) {
                if (jj < 32)
                    zk[0] = z;
                else
                    zk[1] = z;
            }
        }
        const float m_new = fmaxf(m, mx);
        const float c = m_new == m ? 1.0f : as_d_expf(m - m_new);
        // lane l: the weights of entries j0 + l and j0 + 32 + l (0 for skipped ones: z = -inf)
        const float pk[2] = {as_d_expf(zk[0] - m_new), as_d_expf(zk[1] - m_new)};
        const float ls = as_d_warp_sum(pk[0] + pk[1]);
        float bo[kWarpE];
#pragma unroll
        for (int e = 0; e < kWarpE; e++)
            bo[e] = 0.0f;
        for (int jj = 0; jj < nj; jj++) {
            const uint16_t *row = row_of(j0 + jj);
            if (!row)
                continue;
            const float pb = as_d_bf16(__shfl_sync(0xffffffffu, jj < 32 ? pk[0] : pk[1], jj & 31));
#pragma unroll
            for (int e = 0; e < kWarpE; e++) {
                const int d = lane + 32 * e;
                bo[e] = fmaf(pb, d < hd ? as_d_bf16_to_f32(row[d]) : 0.0f, bo[e]);
            }
        }
        l = l * c + ls;
#pragma unroll
        for (int e = 0; e < kWarpE; e++)
            ov[e] = ov[e] * c + bo[e];
        m = m_new;
    }
    const float inv = attn_inv(attn_den(l, m, a.sink[h]));
    uint16_t *dst = a.o + pair * hd;
#pragma unroll
    for (int e = 0; e < kWarpE; e++) {
        const int d = lane + 32 * e;
        if (d < hd)
            dst[d] = as_d_f32_to_bf16(ov[e] * inv);
    }
}

#ifndef AS_EMU // host side (tools/emu runs the kernels above on the CPU)
template <int HD> int set_smem_attr()
{
    return as_allow_dynamic_smem<sparse_attn_mma_kernel<HD>>(AttnSmem<HD>::kBytes);
}

// The split of a selection of topk entries for s queries of nh heads (want_split as in
// as_k_sparse_attn_path): *nsplit splits of *tps tiles of kTR entries (whole softmax blocks).
void split_plan(int s, int nh, int topk, int want_split, int *nsplit_out, int *tps_out)
{
    const int nhb = (nh + kHB - 1) / kHB;
    const int ntiles = (topk + kTR - 1) / kTR;
    int nsplit = 1;
    if (want_split > 0) {
        nsplit = want_split;
    } else if (want_split == 0) {
        const int64_t base = (int64_t)s * nhb, sms = as_sm_count();
        if (base < sms)
            nsplit = (int)((2 * sms + base - 1) / base);
    }
    // Every split stages its entries in shared memory: at most kMaxSplitTiles tiles each.
    nsplit = nsplit < 1 ? 1 : nsplit > ntiles ? ntiles : nsplit;
    if (nsplit < 1)
        nsplit = 1;
    int tps = (ntiles + nsplit - 1) / nsplit;
    tps = tps < 1 ? 1 : tps > kMaxSplitTiles ? kMaxSplitTiles : tps;
    nsplit = (ntiles + tps - 1) / tps;
    if (nsplit < 1)
        nsplit = 1;
    *nsplit_out = nsplit;
    *tps_out = tps;
}

// ws_given / ws_given_bytes: the decode variant's workspace (a.topk_d set), never allocated here: the
// split of a decode launch must not depend on an allocation succeeding.
template <int HD>
int launch_mma(AttnArgs a, int s, int want_split, void *ws_given, size_t ws_given_bytes, cudaStream_t st)
{
    int rc = set_smem_attr<HD>();
    if (rc)
        return rc;
    const int nhb = (a.nh + kHB - 1) / kHB;
    const int ntiles = (a.topk + kTR - 1) / kTR;
    int nsplit, tps;
    split_plan(s, a.nh, a.topk, want_split, &nsplit, &tps);
    a.tiles_per_split = tps;
    a.ws_o = nullptr;
    a.ws_ml = nullptr;
    void *ws = nullptr; // the by-value launch's stream-ordered workspace
    if (nsplit > 1) {
        const size_t bytes = sizeof(float) * (size_t)s * nsplit * a.nh * (HD + 2);
        if (a.topk_d) {
            if (!ws_given || ws_given_bytes < bytes)
                return (int)cudaErrorInvalidValue;
            a.ws_o = (float *)ws_given;
        } else if (cudaMallocAsync(&ws, bytes, st) != cudaSuccess) {
            (void)cudaGetLastError();
            if (ntiles > kMaxSplitTiles) // too wide for one split: no way without the workspace
                return (int)cudaErrorMemoryAllocation;
            ws = nullptr; // one split gives the same result
            nsplit = 1;
            a.tiles_per_split = ntiles > 0 ? ntiles : 1;
        } else {
            a.ws_o = (float *)ws;
        }
        if (a.ws_o)
            a.ws_ml = a.ws_o + (size_t)s * nsplit * a.nh * HD;
    }
    if (s > 0x7fffffff || nsplit > 65535 || nhb > 65535)
        rc = (int)cudaErrorInvalidValue;
    if (!rc) {
        dim3 grid((unsigned)s, (unsigned)nsplit, (unsigned)nhb);
        as_launch(sparse_attn_mma_kernel<HD>, grid, kThreads, AttnSmem<HD>::kBytes, st, a);
        rc = AS_LAUNCH_RESULT();
    }
    if (a.ws_o && !rc) {
        dim3 cgrid((unsigned)s, (unsigned)a.nh);
        as_launch(sparse_attn_combine_kernel, cgrid, kCombineThreads, 0, st, a.ws_o, a.ws_ml, a.sink, a.o, a.nh, HD,
                  nsplit, a.topk_d, a.topk, tps);
        rc = AS_LAUNCH_RESULT();
    }
    if (ws) {
        cudaError_t fe = cudaFreeAsync(ws, st);
        if (!rc && fe != cudaSuccess)
            rc = (int)fe;
    }
    return rc;
}

bool one_query_ok(int nh, int hd, int topk, const void *q, const void *rows_a, int na, const void *rows_b, int nb)
{
    return as_k_attn_decode_applies(nh, hd, topk) && as_aligned16(q) && (na == 0 || as_aligned16(rows_a)) &&
           (nb == 0 || as_aligned16(rows_b));
}

#endif // AS_EMU
} // namespace
#ifndef AS_EMU

extern "C" int as_k_sparse_attn_path(const as_bf16_t *q, const as_bf16_t *rows_a, int na, const as_bf16_t *rows_b,
                                     int nb, const int32_t *idx, int topk, const float *sink, as_bf16_t *o, int s,
                                     int nh, int hd, float scale, int path, int split, cudaStream_t st)
{
    // Sizes: s, topk, na, nb >= 0; nh >= 1; 1 <= hd <= 512; every pointer that is read non-null
    // (rows_a only when na > 0, rows_b only when nb > 0).
    if (s < 0 || topk < 0 || na < 0 || nb < 0 || nh <= 0 || hd <= 0 || hd > 512 || path < AS_K_ATTN_AUTO ||
        path > AS_K_ATTN_WGMMA)
        return (int)cudaErrorInvalidValue;
    if (s == 0)
        return 0;
    if (!q || !o || !sink || (topk > 0 && !idx) || (na > 0 && !rows_a) || (nb > 0 && !rows_b))
        return (int)cudaErrorInvalidValue;
    if ((int64_t)s * nh * hd > ((int64_t)1 << 40) || (int64_t)s * topk > ((int64_t)1 << 40))
        return (int)cudaErrorInvalidValue;
    AttnArgs a{q, rows_a, na, rows_b, nb, idx, topk, sink, o, nh, scale, 1, nullptr, nullptr};
    const bool hd_ok = hd == 64 || hd == 128 || hd == 256 || hd == 512;
    const bool fast_ok = nh % 16 == 0 && hd_ok && topk > 0 && as_aligned16(q) && as_aligned16(o) &&
                         (na == 0 || as_aligned16(rows_a)) && (nb == 0 || as_aligned16(rows_b));
    if (path == AS_K_ATTN_MMA && !fast_ok)
        return (int)cudaErrorInvalidValue;
    if (path == AS_K_ATTN_WGMMA) // the wgmma kernel (kernels/sparse_attn_wgmma.cu) or cudaErrorInvalidValue
        return as_k_sparse_attn_wgmma(q, rows_a, na, rows_b, nb, idx, topk, sink, o, s, nh, hd, scale, st);
    // one query: the split kernel of attn_decode.cu (8 or 4 heads x 64 entries a block), automatic path only
    if (path == AS_K_ATTN_AUTO && s == 1 && one_query_ok(nh, hd, topk, q, rows_a, na, rows_b, nb))
        return as_k_attn_decode(q, rows_a, na, rows_b, nb, nullptr, idx, topk, nullptr, sink, o, nh, hd, scale, nullptr,
                                0, nullptr, 0, st);
    // enough queries to fill the device without splitting the selection (prefill) on sm_90: wgmma
    if (path == AS_K_ATTN_AUTO && split == 0 && (int64_t)s * ((nh + kHB - 1) / kHB) >= as_sm_count() &&
        as_k_sparse_attn_wgmma_applies(nh, hd, topk, q, o, rows_a, na, rows_b, nb))
        return as_k_sparse_attn_wgmma(q, rows_a, na, rows_b, nb, idx, topk, sink, o, s, nh, hd, scale, st);
    if (path != AS_K_ATTN_WARP && fast_ok) {
        switch (hd) {
        case 64: return launch_mma<64>(a, s, split, nullptr, 0, st);
        case 128: return launch_mma<128>(a, s, split, nullptr, 0, st);
        case 256: return launch_mma<256>(a, s, split, nullptr, 0, st);
        default: return launch_mma<512>(a, s, split, nullptr, 0, st);
        }
    }
    const int64_t warps = (int64_t)s * nh;
    if ((warps + 3) / 4 > 0x7fffffff)
        return (int)cudaErrorInvalidValue;
    as_launch(sparse_attn_warp_kernel, (unsigned)((warps + 3) / 4), 128, 0, st, a, s, hd);
    return AS_LAUNCH_RESULT();
}

extern "C" int as_k_sparse_attn(const as_bf16_t *q, const as_bf16_t *rows_a, int na, const as_bf16_t *rows_b, int nb,
                                const int32_t *idx, int topk, const float *sink, as_bf16_t *o, int s, int nh, int hd,
                                float scale, cudaStream_t st)
{
    return as_k_sparse_attn_path(q, rows_a, na, rows_b, nb, idx, topk, sink, o, s, nh, hd, scale, AS_K_ATTN_AUTO, 0,
                                 st);
}

namespace {
// Whether the tensor-core kernel takes the decode launch (as_k_sparse_attn_path's rule at topk_max).
bool decode_fast(int nh, int hd, int topk_max, bool aligned)
{
    const bool hd_ok = hd == 64 || hd == 128 || hd == 256 || hd == 512;
    return nh % 16 == 0 && hd_ok && topk_max > 0 && aligned;
}
} // namespace

// as_k_sparse_attn_decode without o_back; *fused set where the one-query kernel wrote it (ob given).
static int sparse_attn_decode(const as_bf16_t *q, const as_bf16_t *rows_a, int na, const as_bf16_t *rows_b, int nb_max,
                              const int32_t *nb_d, const int32_t *idx, int topk_max, const int32_t *topk_d,
                              const float *sink, as_bf16_t *o, int s, int nh, int hd, float scale, void *ws,
                              size_t ws_bytes, const AsOBack *ob, int early_rows, int path, bool *fused,
                              cudaStream_t st)
{
    if (s < 0 || topk_max < 0 || na < 0 || nb_max < 0 || nh <= 0 || hd <= 0 || hd > 512 || !topk_d || !nb_d ||
        path < AS_K_ATTN_AUTO || path > AS_K_ATTN_WGMMA)
        return (int)cudaErrorInvalidValue;
    if (s == 0)
        return 0;
    if (!q || !o || !sink || (topk_max > 0 && !idx) || (na > 0 && !rows_a) || (nb_max > 0 && !rows_b))
        return (int)cudaErrorInvalidValue;
    if ((int64_t)s * nh * hd > ((int64_t)1 << 40) || (int64_t)s * topk_max > ((int64_t)1 << 40))
        return (int)cudaErrorInvalidValue;
    AttnArgs a{q, rows_a, na, rows_b, nb_max, idx, topk_max, sink, o, nh, scale, 1, nullptr, nullptr};
    a.topk_d = topk_d;
    a.nb_d = nb_d;
    if (path == AS_K_ATTN_AUTO && s == 1 && one_query_ok(nh, hd, topk_max, q, rows_a, na, rows_b, nb_max)) {
        *fused = ob != nullptr;
        return as_k_attn_decode(q, rows_a, na, rows_b, nb_max, nb_d, idx, topk_max, topk_d, sink, o, nh, hd, scale, ws,
                                ws_bytes, ob, early_rows, st);
    }
    const bool fast_ok = decode_fast(nh, hd, topk_max,
                                     as_aligned16(q) && as_aligned16(o) && (na == 0 || as_aligned16(rows_a)) &&
                                         (nb_max == 0 || as_aligned16(rows_b)));
    if (path == AS_K_ATTN_MMA && !fast_ok)
        return (int)cudaErrorInvalidValue;
    if (path != AS_K_ATTN_WARP && fast_ok) {
        switch (hd) {
        case 64: return launch_mma<64>(a, s, 0, ws, ws_bytes, st);
        case 128: return launch_mma<128>(a, s, 0, ws, ws_bytes, st);
        case 256: return launch_mma<256>(a, s, 0, ws, ws_bytes, st);
        default: return launch_mma<512>(a, s, 0, ws, ws_bytes, st);
        }
    }
    const int64_t warps = (int64_t)s * nh;
    if ((warps + 3) / 4 > 0x7fffffff)
        return (int)cudaErrorInvalidValue;
    as_launch(sparse_attn_warp_kernel, (unsigned)((warps + 3) / 4), 128, 0, st, a, s, hd);
    return AS_LAUNCH_RESULT();
}

extern "C" int as_k_sparse_attn_decode(const as_bf16_t *q, const as_bf16_t *rows_a, int na, const as_bf16_t *rows_b,
                                       int nb_max, const int32_t *nb_d, const int32_t *idx, int topk_max,
                                       const int32_t *topk_d, const float *sink, as_bf16_t *o, int s, int nh, int hd,
                                       float scale, void *ws, size_t ws_bytes, const AsOBack *ob, int early_rows,
                                       int path, cudaStream_t st)
{
    if (ob && (s != 1 || !as_oback_ok(ob, hd)))
        return (int)cudaErrorInvalidValue;
    bool fused = false;
    int rc = sparse_attn_decode(q, rows_a, na, rows_b, nb_max, nb_d, idx, topk_max, topk_d, sink, o, s, nh, hd, scale,
                                ws, ws_bytes, ob, early_rows, path, &fused, st);
    if (rc || !ob || fused)
        return rc;
    return as_k_o_back(o, s, nh, hd, ob, st);
}

extern "C" int as_k_sparse_attn_decode_plan(int s, int nh, int hd, int topk_max, int path, int *mma,
                                            int *tiles_per_split, size_t *ws_bytes)
{
    *mma = 0;
    *tiles_per_split = 0;
    *ws_bytes = 0;
    if (s <= 0 || nh <= 0 || hd <= 0 || hd > 512 || topk_max < 0 || path < AS_K_ATTN_AUTO || path > AS_K_ATTN_WGMMA)
        return (int)cudaErrorInvalidValue;
    if (path == AS_K_ATTN_AUTO && s == 1 && as_k_attn_decode_applies(nh, hd, topk_max)) {
        *mma = 2;
        *ws_bytes = as_k_attn_decode_ws_bytes(nh, hd, topk_max);
        return as_k_attn_decode_prepare(hd); // its kernels' shared-memory limits, before any capture

    }
    if (path == AS_K_ATTN_WARP || !decode_fast(nh, hd, topk_max, true))
        return 0;
    int nsplit, tps;
    split_plan(s, nh, topk_max, 0, &nsplit, &tps);
    *mma = 1;
    *tiles_per_split = tps;
    *ws_bytes = nsplit > 1 ? sizeof(float) * (size_t)s * nsplit * nh * (hd + 2) : 0;
    // the kernel's shared-memory limit, raised here, before any capture
    switch (hd) {
    case 64: return set_smem_attr<64>();
    case 128: return set_smem_attr<128>();
    case 256: return set_smem_attr<256>();
    default: return set_smem_attr<512>();
    }
}
#endif // AS_EMU
