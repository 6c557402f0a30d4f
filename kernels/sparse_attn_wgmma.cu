// Sparse attention with the attention sink on Hopper's warpgroup MMA (wgmma, sm_90a): the prefill
// form of kernels/sparse_attn.cu for hd 512 (the flash geometry). Same math (kernel.py's blockwise
// softmax, stated in kernels/sparse_attn.cu's header: blocks of 64 entries from m = -1e30, f32 p into
// the denominator, bf16(p) into P.R, the sink added to the denominator at the end), same twin
// (as_sparse_attention in ref/attention.c), same tests (tests/gpu_sparse_attn.c, path 3). A tile of
// 64 selected rows is one of kernel.py's blocks, so the tiles start at entry 0 and the running max
// moves once a tile.
//
// Why a second kernel: the mma.sync kernel feeds every warp's tensor-core operands through ldmatrix,
// one copy per warp, about 6 MAC per shared-memory byte, which caps it far below the tensor-core
// rate. A warpgroup's wgmma reads its shared operands once for 64 rows: about twice the mma.sync
// kernel's rate at the flash prefill (bench/RESULTS.md lists the variants tried and dropped).
//
// One block per (query t, 64-head block): 256 threads = two warpgroups, wg 0 and wg 1.
//   shared memory (1024-aligned, 128-byte swizzle, kernels/wgmma.cuh): Q [64 heads][512] (64 KB),
//   two stages of 64 gathered rows [64][512] (64 KB each, cp.async; a skipped index is zero-filled
//   and masked), an f32 exchange tile per warpgroup (16 KB each), the stages' row biases (0 / -inf).
//   per tile of 64 selected rows, warpgroup w:
//     S_w = Q[:, 256 w .. +256] . R[:, 256 w .. +256]^T    16 x wgmma m64n64k16 (both from shared)
//     S = S_w + S_(1-w) through shared memory, each warpgroup for the 32 rows it exponentiates (it
//       hands the other its partial sums of the other 32: fp addition commutes, so either order gives
//       the same bits), z = S * scale, -inf for skipped rows; the halves' row maxima swapped;
//     the block's softmax step per head: m' = max(m, the tile's max); O and l are rescaled by
//       c = exp(m - m') in a warp where a row's max moved (c = 1 for its other rows; a warp where none
//       moved skips the multiplies: the same bits); p = exp(z - m') against that true running max
//       (bf16(p) must be rounded relative to it); each warpgroup exponentiates half of the tile's rows,
//       sums its part of the f32 p, and the bf16 halves are swapped through shared memory;
//     O_w = O_w c + bf16(P) . R[:, 256 w .. +256]      4 x wgmma m64n256k16 (P from registers)
//   The next tile's rows are in flight (cp.async) while a tile is computed; the selection entries
//   two tiles ahead are read into registers meanwhile. The loop stops after the last tile holding a
//   row that exists: an early query's selection ends in -1 entries, whose tiles would change nothing
//   (m' = m, c = 1, p = 0).
//   The selection's first 1024 entries are read before anything else, as independent loads that
//   land with Q's and tile 0's copies (as a dependent loop after them the scan measured slower on
//   full selections: bench/RESULTS.md).
//   end: den = l + exp(sink - m), o = O * (1 / den), the bf16 rows staged in the Q buffer and written
//   with coalesced 16-byte stores.
// No split over the selection: the launcher takes this kernel where s x head blocks fill the device
// (prefill); decode and short chunks keep kernels/sparse_attn.cu and kernels/attn_decode.cu. Blocks
// run from the last query down: the heavy ones first, the light ones fill the last wave.
#include <math.h>
#include <stdint.h>

#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/mma.cuh"
#include "kernels/sparse_attn_args.cuh"
#include "kernels/wgmma.cuh"

namespace {

using asmma::cp_async16;
using asmma::cp_async_commit;
using asmma::cp_async_wait;
using asmma::pack_bf16x2;
using asmma::smem_u32;

constexpr int kHD = 512;
constexpr int kThreads = 256;
constexpr int kHB = 64;                  // heads per block (wgmma M)
constexpr int kTR = 64;                  // selected rows per tile
constexpr uint32_t kBlk = 64 * 128;      // one 64-dim column block of a 64-row tile
constexpr uint32_t kQBytes = 8 * kBlk;   // 64 KB
constexpr uint32_t kRBytes = 8 * kBlk;   // 64 KB a stage
constexpr uint32_t kXBytes = 2 * 128 * 32 * 4;
constexpr uint32_t kBiasBytes = 2 * kTR * 4;
constexpr uint32_t kLastBytes = 8 * 4; // [8 warps]: each one's last tile holding a row that exists
constexpr uint32_t kSmemBytes = 1024 + kQBytes + 2 * kRBytes + kXBytes + kBiasBytes + kLastBytes; // 230944
constexpr float kLog2e = 1.4426950408889634f;
static_assert(kHB == kTR, "Q and a row tile share one layout");
static_assert(kTR == asattn::kBlock, "a tile is one block of kernel.py's softmax");
static_assert(kSmemBytes <= 227 * 1024, "an sm_90 block's shared memory");

// Byte offset of 16-byte chunk `ch` (0..63) of row `row` in a swizzled 64-row tile.
__device__ __forceinline__ uint32_t tile_off(int row, int ch)
{
    return (uint32_t)((ch >> 3) * kBlk + row * 128 + (((ch & 7) ^ (row & 7)) << 4));
}

// 2^x (MUFU.EX2; relative error ~2^-22, flushes results below 2^-126 to 0: weights that small vanish
// against the row's largest, which is 1).
__device__ __forceinline__ float ex2_approx(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// This thread's partial S of the other warpgroup's half (fragment chunks 4 (1 - H) .. + 3: rows
// 32 (1 - H) .. + 31 of the tile), for it to sum: four 16-byte slots 128 x 16 bytes apart.
template <int H> __device__ __forceinline__ void give_partial(const float (&s)[32], float4 *out)
{
#pragma unroll
    for (int jj = 0; jj < 4; jj++) {
        const int j = 4 * (1 - H) + jj;
        out[jj * 128] = make_float4(s[4 * j], s[4 * j + 1], s[4 * j + 2], s[4 * j + 3]);
    }
}
// S of half H (chunks 4 H .. 4 H + 3): this warpgroup's partial + the other's from `in`, z = S * scale
// (one rounding: the fma's addend is 0) or -inf for a skipped row (bias); m: the half's maximum of rows
// g and g + 8 over the quad.
template <int H>
__device__ __forceinline__ void sum_half(float (&s)[32], const float4 *in, const float *bias, float scale,
                                         float (&m)[2])
{
#pragma unroll
    for (int jj = 0; jj < 4; jj++) {
        const int j = 4 * H + jj;
        const float4 o4 = in[jj * 128];
        const float2 b2 = *(const float2 *)(bias + 8 * j);
        s[4 * j + 0] = fmaf(s[4 * j + 0] + o4.x, scale, b2.x);
        s[4 * j + 1] = fmaf(s[4 * j + 1] + o4.y, scale, b2.y);
        s[4 * j + 2] = fmaf(s[4 * j + 2] + o4.z, scale, b2.x);
        s[4 * j + 3] = fmaf(s[4 * j + 3] + o4.w, scale, b2.y);
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float v = -INFINITY;
#pragma unroll
        for (int j = 4 * H; j < 4 * H + 4; j++)
            v = fmaxf(v, fmaxf(s[4 * j + 2 * r], s[4 * j + 2 * r + 1]));
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
        m[r] = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
    }
}

// The weights of half H of a tile's 64 rows (S fragment chunks 4 H .. 4 H + 3, in place in s): p =
// 2^(z log2 e - mc), their part of the row sums into l, and as bf16 A fragments of the O product's
// k-steps 2 H, 2 H + 1, kept in pf and written for the other warpgroup to `out` (two 16-byte slots
// 128 x 16 bytes apart).
template <int H>
__device__ __forceinline__ void weights_half(float (&s)[32], const float (&mc)[2], float (&l)[2], uint32_t (&pf)[4][4],
                                             uint4 *out)
{
#pragma unroll
    for (int i = 16 * H; i < 16 * H + 16; i++)
        s[i] = ex2_approx(fmaf(s[i], kLog2e, -mc[(i >> 1) & 1]));
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float ls = 0.0f;
#pragma unroll
        for (int j = 4 * H; j < 4 * H + 4; j++)
            ls += s[4 * j + 2 * r] + s[4 * j + 2 * r + 1];
        l[r] += ls;
    }
#pragma unroll
    for (int kk = 2 * H; kk < 2 * H + 2; kk++) {
        pf[kk][0] = pack_bf16x2(s[8 * kk + 0], s[8 * kk + 1]); // row g, rows 16 kk + 2 c4 (+1)
        pf[kk][1] = pack_bf16x2(s[8 * kk + 2], s[8 * kk + 3]); // row g + 8
        pf[kk][2] = pack_bf16x2(s[8 * kk + 4], s[8 * kk + 5]); // row g, rows 16 kk + 8 + 2 c4
        pf[kk][3] = pack_bf16x2(s[8 * kk + 6], s[8 * kk + 7]); // row g + 8
        out[(kk - 2 * H) * 128] = make_uint4(pf[kk][0], pf[kk][1], pf[kk][2], pf[kk][3]);
    }
}
// The other warpgroup's half H of the bf16 weights, from `in` (as weights_half wrote them).
template <int H> __device__ __forceinline__ void take_half(uint32_t (&pf)[4][4], const uint4 *in)
{
#pragma unroll
    for (int kk = 2 * H; kk < 2 * H + 2; kk++) {
        const uint4 v = in[(kk - 2 * H) * 128];
        pf[kk][0] = v.x, pf[kk][1] = v.y, pf[kk][2] = v.z, pf[kk][3] = v.w;
    }
}

using asattn::AttnArgs;

__global__ void __launch_bounds__(kThreads, 1) sparse_attn_wgmma_kernel(AttnArgs a)
{
    as_d_pdl_wait();
#ifdef AS_WGMMA
    extern __shared__ uint8_t smem_raw[];
    // 1024-aligned base (the swizzle atoms' alignment, descriptor base offset 0)
    const uint32_t raw = smem_u32(smem_raw), pad = ((raw + 1023u) & ~1023u) - raw;
    uint8_t *smem = smem_raw + pad;
    uint8_t *sq = smem;                                            // Q, later the bf16 output
    // [2 wg][8 slots][128 threads]: a tile's slots 0-3 hold the partial S handed over, 4 the half's
    // row maxima, 0-1 then the bf16 weights handed over; after the loop, 0 the row sums
    float4 *sx = (float4 *)(smem + kQBytes + 2 * kRBytes);
    float *sbias = (float *)(smem + kQBytes + 2 * kRBytes + kXBytes); // [2][64]: 0, or -inf for a skipped row
    int *slast = (int *)(smem + kQBytes + 2 * kRBytes + kXBytes + kBiasBytes); // [8 warps]
    const uint32_t sq_a = smem_u32(sq), sr_a = sq_a + kQBytes;

    // wg through a broadcast: the compiler then knows it is warp-uniform and keeps the descriptors
    // in uniform registers (a k-step is one uniform add, not a move of each half into them)
    const int tid = threadIdx.x, wg = __shfl_sync(0xffffffffu, tid >> 7, 0), tig = tid & 127, lane = tid & 31;
    const int wi = tig >> 5, g = lane >> 2, c4 = lane & 3;
    // the last query first: a prefill's later queries select more rows that exist (more tiles), so
    // the heavy blocks go out in the first waves and the light ones fill the last, short wave
    const int t = (int)(gridDim.x - 1 - blockIdx.x), h0 = blockIdx.y * kHB;
    const int64_t nrows = (int64_t)a.na + a.nb;
    const int ntiles = (a.topk + kTR - 1) / kTR;
    const int32_t *sel = a.idx + (int64_t)t * a.topk;

    // The copy pattern of a 64-row tile: thread tid moves chunks cq + 4 i (i < 16) of row tid / 4, so
    // one selection entry a thread a tile, and four lanes cover 64 contiguous bytes of a row.
    const int cp_row = tid >> 2, cq = tid & 3;
    // destination of chunk cq + 4 i: column block i / 2, 16-byte slot (cq + 4 (i & 1)) ^ (row % 8)
    const uint32_t dst_row = (uint32_t)cp_row * 128, dst_even = (uint32_t)((cq ^ (cp_row & 7)) << 4),
                   dst_odd = (uint32_t)(((cq + 4) ^ (cp_row & 7)) << 4);
    auto copy_row = [&](uint32_t tile, const uint16_t *src, bool ok) { // src: the row's first element
#pragma unroll
        for (int i = 0; i < 16; i++)
            cp_async16(tile + (uint32_t)(i >> 1) * kBlk + dst_row + ((i & 1) ? dst_odd : dst_even),
                       src + (cq + 4 * i) * 8, ok ? 16 : 0);
    };
    // The selection's first kScan x 256 entries, one a thread a round, read before anything else as
    // independent loads: they are in flight with Q's and tile 0's copies (the tile bound below).
    constexpr int kScan = 4; // rounds: topk <= 1024 entirely
    int scan[kScan];
#pragma unroll
    for (int i = 0; i < kScan; i++) {
        const int e = i * kThreads + tid;
        scan[i] = e < a.topk ? __ldg(sel + e) : -1;
    }
    {
        const bool ok = h0 + cp_row < a.nh;
        copy_row(sq_a, ok ? a.q + ((int64_t)t * a.nh + h0 + cp_row) * kHD : a.q, ok);
    }
    auto entry = [&](int it) { // this thread's selection entry of tile `it`
        const int e = it * kTR + cp_row;
        return e < a.topk ? __ldg(sel + e) : -1;
    };
    auto load_tile = [&](int it, int v) {
        const int stage = it & 1;
        const bool ok = v >= 0 && v < nrows;
        // a skipped row reads nothing (zero-fill); its source only has to be a valid address
        const uint16_t *src = !ok ? a.q : v < a.na ? a.rows_a + (int64_t)v * kHD : a.rows_b + (int64_t)(v - a.na) * kHD;
        copy_row(sr_a + stage * kRBytes, src, ok);
        if (cq == 0)
            sbias[stage * kTR + cp_row] = ok ? 0.0f : -INFINITY;
    };
    int ent_next = ntiles > 1 ? entry(1) : -1; // the entry of the next tile to load
    if (ntiles > 0)
        load_tile(0, entry(0));
    cp_async_commit(); // group: Q + tile 0
    // The tiles after the last one holding a row that exists add nothing (every weight 0): the loop
    // stops there (an early query's selection ends in -1). Read while Q and tile 0 land.
    int nt;
    {
        int last = -1;
#pragma unroll
        for (int i = 0; i < kScan; i++)
            if (scan[i] >= 0 && scan[i] < nrows)
                last = (i * kThreads + tid) / kTR; // i grows: the thread's last
        for (int e = kScan * kThreads + tid; e < a.topk; e += kThreads) { // a topk above kScan x 256
            const int v = __ldg(sel + e);
            if (v >= 0 && v < nrows)
                last = e / kTR;
        }
        last = __reduce_max_sync(0xffffffffu, last);
        if (lane == 0)
            slast[tid >> 5] = last;
        __syncthreads();
#pragma unroll
        for (int w = 0; w < kThreads / 32; w++)
            last = max(last, slast[w]);
        // tile 0 is loaded: it runs even when nothing exists. Through a broadcast, as wg: the compiler
        // then knows the loop's control is warp-uniform and keeps the stage's descriptors uniform
        nt = __shfl_sync(0xffffffffu, min(ntiles, max(last + 1, 1)), 0);
    }

    float acc_o[128];
#pragma unroll
    for (int i = 0; i < 128; i++)
        acc_o[i] = 0.0f;
    float m_run[2] = {asattn::kMaxInit, asattn::kMaxInit}; // rows g, g + 8 of warp wi: heads 16 wi + g, + 8
    float l_run[2] = {0.0f, 0.0f};           // this thread's part of the row sums
    // Descriptors of this warpgroup's hd half: Q (K-major), a stage's rows (K-major for S, MN-major for O).
    // A k-step adds its byte offset / 16 to the start-address field (no carry: shared addresses < 256 KB).
    const uint64_t dq = aswg::desc_sw128(sq_a + (uint32_t)(4 * wg) * kBlk, 16, 1024);
    const uint64_t ds0 = aswg::desc_sw128(sr_a + (uint32_t)(4 * wg) * kBlk, 16, 1024);
    const uint64_t do0 = aswg::desc_sw128(sr_a + (uint32_t)(4 * wg) * kBlk, kBlk, 1024);

    for (int it = 0; it < nt; it++) {
        const int stage = it & 1;
        const uint64_t stage_step = (uint64_t)(stage * kRBytes) >> 4;
        cp_async_wait<0>();
        aswg::fence_proxy_async();
        __syncthreads(); // tile `it` (and Q) landed and visible to wgmma; everyone is done with tile it - 1

        // ---- S_w = Q[:, half w] . R[:, half w]^T (64 heads x 64 rows, K = 256), issued first
        float s[32];
#pragma unroll
        for (int i = 0; i < 32; i++)
            s[i] = 0.0f;
        aswg::pin(s);
        aswg::fence();
#pragma unroll
        for (int k = 0; k < 16; k++) {
            const uint64_t step = (uint64_t)((k >> 2) * kBlk + (k & 3) * 32) >> 4;
            aswg::wgmma_m64n64k16_ss(s, dq + step, ds0 + stage_step + step);
        }
        aswg::commit();
        // ---- while it runs: the next tile's rows into the other stage, the entry after it into a register
        if (it + 1 < nt) {
            load_tile(it + 1, ent_next);
            cp_async_commit();
            ent_next = it + 2 < nt ? entry(it + 2) : -1;
        }
        aswg::wait<0>();
        aswg::pin(s);

        // ---- S = S_w + S_other, each warpgroup for its half of the tile's rows (the ones it exponentiates):
        // the thread of the same index in the other warpgroup holds the same elements, so each hands it
        // the partial sums of the other half and takes the other's of its own (fp addition commutes:
        // both orders give the same bits); then the rows' maxima of the two halves are swapped.
        float4 *xmine = sx + wg * 8 * 128 + tig;
        const float4 *xtheirs = sx + (1 - wg) * 8 * 128 + tig;
        if (wg == 0)
            give_partial<0>(s, xmine);
        else
            give_partial<1>(s, xmine);
        asmma::bar_named(1, kThreads);
        const float *bias = sbias + stage * kTR + 2 * c4;
        float mx[2];
        if (wg == 0)
            sum_half<0>(s, xtheirs, bias, a.scale, mx);
        else
            sum_half<1>(s, xtheirs, bias, a.scale, mx);
        xmine[4 * 128] = make_float4(mx[0], mx[1], 0.0f, 0.0f);
        asmma::bar_named(1, kThreads);
        {
            const float4 om = xtheirs[4 * 128];
            mx[0] = fmaxf(mx[0], om.x);
            mx[1] = fmaxf(mx[1], om.y);
        }
        // ---- the block's softmax step, rows g (e = 0, 1) and g + 8 (e = 2, 3): m' = max(m, the tile's
        // max); where a row of the warp moved, its O and l are rescaled by c = exp(m - m') (c = 1 for the
        // others; the same decision in both warpgroups: they hold the same maxima). One warp-uniform
        // branch for both rows (one for each row measured slower).
        float mc[2], alpha[2];
        bool moved = false;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const float m_new = fmaxf(m_run[r], mx[r]); // >= -1e30: finite
            moved |= m_new != m_run[r];
            alpha[r] = m_new == m_run[r] ? 1.0f : ex2_approx((m_run[r] - m_new) * kLog2e);
            m_run[r] = m_new;
            mc[r] = m_new * kLog2e;
        }
        if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
            for (int r = 0; r < 2; r++)
                l_run[r] *= alpha[r];
#pragma unroll
            for (int j = 0; j < 32; j++) {
                acc_o[4 * j + 0] *= alpha[0];
                acc_o[4 * j + 1] *= alpha[0];
                acc_o[4 * j + 2] *= alpha[1];
                acc_o[4 * j + 3] *= alpha[1];
            }
        }
        // ---- the weights, half each: warpgroup w exponentiates rows 32 w .. 32 w + 31 of the tile (k-steps
        // 2 w, 2 w + 1 of the O product) and keeps their part of the row sums; the bf16 halves are swapped
        // through the slots just read (each thread's partner reads only its own slots)
        uint32_t pf[4][4];
        uint4 *mine = (uint4 *)(sx + (1 - wg) * 8 * 128 + tig), *theirs = (uint4 *)(sx + wg * 8 * 128 + tig);
        if (wg == 0)
            weights_half<0>(s, mc, l_run, pf, mine);
        else
            weights_half<1>(s, mc, l_run, pf, mine);
        asmma::bar_named(1, kThreads);
        if (wg == 0)
            take_half<1>(pf, theirs);
        else
            take_half<0>(pf, theirs);
        // ---- O_w += bf16(P) . R[:, half w]: K = 64 rows (4 k-steps of 16), N = 256 dims. Waited for
        // here, not left in flight into the next tile: with a wgmma in flight across the loop edge,
        // ptxas serialises every wgmma (C7514 / C7515) as soon as any other instruction defines or
        // reads an accumulator (the zeroing of O, the rescale), and it does not credit
        // wgmma.wait_group 1 with retiring the older group (measured: bench/RESULTS.md, v4).
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
            aswg::pin(pf[kk]);
        aswg::pin(acc_o);
        aswg::fence();
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
            aswg::wgmma_m64n256k16_rs(acc_o, pf[kk], do0 + stage_step + (uint64_t)(kk * 16 * 128 >> 4));
        aswg::commit();
        aswg::wait<0>();
        aswg::pin(acc_o);
    }
    cp_async_wait<0>();

    // Row sums: this warpgroup's half plus the other's (own + other: the same bits in both, addition
    // commutes), then over the quad (same association in all four lanes and in both warpgroups).
    __syncthreads(); // every weight swap of the last tile is read
    *(float2 *)(sx + wg * 8 * 128 + tig) = make_float2(l_run[0], l_run[1]);
    __syncthreads();
    {
        const float2 other = *(const float2 *)(sx + (1 - wg) * 8 * 128 + tig);
        l_run[0] += other.x;
        l_run[1] += other.y;
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
    }
    const int hl[2] = {wi * 16 + g, wi * 16 + g + 8}; // local heads of rows g, g + 8
    float inv[2]; // 1 / den, the sink in the denominator
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int h = h0 + hl[r];
        inv[r] = asattn::attn_inv(asattn::attn_den(l_run[r], m_run[r], h < a.nh ? a.sink[h] : 0.0f));
    }
    __syncthreads(); // every warpgroup is done reading Q
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
        for (int j = 0; j < 32; j++)
            *(uint32_t *)(sq + tile_off(hl[r], wg * 32 + j) + c4 * 4) =
                pack_bf16x2(acc_o[4 * j + 2 * r] * inv[r], acc_o[4 * j + 2 * r + 1] * inv[r]);
    __syncthreads();
    if (h0 + cp_row < a.nh) { // row cp_row, chunks cq + 4 i: the copy pattern of the loads
        uint16_t *orow = a.o + ((int64_t)t * a.nh + h0 + cp_row) * kHD;
#pragma unroll
        for (int i = 0; i < 16; i++)
            *(uint4 *)(orow + (cq + 4 * i) * 8) = *(const uint4 *)(sq + tile_off(cp_row, cq + 4 * i));
    }
#else
    (void)a, (void)kLog2e, (void)tile_off(0, 0), (void)ex2_approx(0.0f);
    __trap(); // not the sm_90a code: the launcher never gets here (as_k_sparse_attn_wgmma_applies)
#endif // AS_WGMMA
}

} // namespace

extern "C" int as_k_sparse_attn_wgmma_applies(int nh, int hd, int topk, const void *q, const void *o,
                                              const void *rows_a, int na, const void *rows_b, int nb)
{
    // sm_90a code runs on compute capability 9.0 only
    return hd == kHD && nh > 0 && nh % 16 == 0 && topk > 0 && as_aligned16(q) && as_aligned16(o) &&
           (na == 0 || as_aligned16(rows_a)) && (nb == 0 || as_aligned16(rows_b)) && as_compute_capability() == 90;
}

extern "C" int as_k_sparse_attn_wgmma(const as_bf16_t *q, const as_bf16_t *rows_a, int na, const as_bf16_t *rows_b,
                                      int nb, const int32_t *idx, int topk, const float *sink, as_bf16_t *o, int s,
                                      int nh, int hd, float scale, cudaStream_t st)
{
    if (s < 0 || na < 0 || nb < 0 || !q || !o || !sink || !idx || (na > 0 && !rows_a) || (nb > 0 && !rows_b))
        return (int)cudaErrorInvalidValue;
    if (!as_k_sparse_attn_wgmma_applies(nh, hd, topk, q, o, rows_a, na, rows_b, nb))
        return (int)cudaErrorInvalidValue;
    if (s == 0)
        return 0;
    const int nhb = (nh + kHB - 1) / kHB;
    if (nhb > 65535)
        return (int)cudaErrorInvalidValue;
    const int rc = as_allow_dynamic_smem<sparse_attn_wgmma_kernel>((int)kSmemBytes);
    if (rc)
        return rc;
    const AttnArgs a{q, rows_a, na, rows_b, nb, idx, topk, sink, o, nh, scale, 1, nullptr, nullptr};
    as_launch(sparse_attn_wgmma_kernel, dim3((unsigned)s, (unsigned)nhb), kThreads, kSmemBytes, st, a);
    return AS_LAUNCH_RESULT();
}
