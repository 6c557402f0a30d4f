// The Indexer's scores with the visibility mask, fused (twins: as_index_scores +
// as_index_visibility in ref/indexer.c; test: tests/gpu_index_scores.c):
//
//   score[t][p] = bf16( sum_{h = 0..nh-1} bf16( relu( bf16(iq[t][h] . k[p]) ) * w[t][h] ) )   p < clen[t]
//               = -inf                                                                        p >= clen[t]
//   clen[t] = start_pos == 0 ? (t + 1) / ratio : width   (clamped to [0, width])
//
// Exactness: the dot is f32 (any order: tensor cores); every other step is the reference's, in its
// order: bf16 RNE of the dot, relu, one f32 product with w rounded to bf16, an f32 sum over heads
// h = 0, 1, ..., nh-1 starting from +0, one bf16 RNE at the end. With fp4-quantised iq and keys (as
// the model has them) every dot is exact in f32 in any order, so the scores are bit-identical.
//
// Fast path (nh == 32, ihd in {64, 128}): tensor cores, mma.sync m16n8k16 bf16 -> f32.
//   block = 8 warps; warp w owns query t = 8 * blockIdx.x + w: its 32 heads are the M = 32 rows
//   (two m16 tiles), its A fragments (iq[t], 32 x ihd) stay in registers for the whole block.
//   Keys stream through shared memory in tiles of 64 positions (cp.async, two stages, rows padded
//   by 16 bytes: conflict-free ldmatrix); every warp multiplies the same key tile: C = 32 x 64.
//   Epilogue per warp: per-head terms bf16(relu(bf16(c)) * w[h]) go to a per-warp shared tile
//   [64 positions][32 heads] (bf16, head slots permuted so a thread's four heads of one position
//   are one 8-byte store; row stride 80 bytes: conflict-free), then lane l sums positions l and
//   l + 32 over the heads in order and stores the bf16 score (or -inf). The [s][nh][width] dots
//   never leave registers.
//   blockIdx.y splits the positions into chunks of tiles (tiles_per_block); key tiles wholly past
//   the block's last visible position are not loaded: their scores are -inf.
// Other geometries (tiny: nh 4, ihd 32) take the scalar kernel: one thread per (t, p), f32 dots.
// Decode graph: as_k_index_scores_decode launches for max_width and reads the live width
// on the device (width_d); a position's score is computed the same way whatever the grid, so the
// scores equal the by-value launch's at that width, and nothing past it is written.
#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/mma.cuh"

namespace {

using namespace asmma;

constexpr int kThreads = 256;
constexpr int kWarps = 8;
constexpr int kHeads = 32;   // fast path: nh == 32
constexpr int kTileP = 64;   // positions per key tile
constexpr int kTRow = 40;    // bf16 per row of the per-warp transposition tile (32 heads + 8 pad)
constexpr uint16_t kNegInf = 0xff80;
constexpr int kRowSmem = kWarps * 8 * kTRow * 2; // index_scores_row_kernel's shared memory

__device__ __forceinline__ int clen_of(int t, int start_pos, int ratio, int width)
{
    int c = start_pos == 0 ? (t + 1) / ratio : width;
    return c < 0 ? 0 : c > width ? width : c;
}

template <int IHD> struct ScoreSmem {
    static constexpr int kRow = IHD + 8;                            // bf16 per key row (16 B pad)
    static constexpr int kKeyBytes = 2 * kTileP * kRow * 2;         // two stages
    static constexpr int kTBytes = kWarps * kTileP * kTRow * 2;     // transposition tiles
    static constexpr int kBytes = kKeyBytes + kTBytes;
};

// One n8 tile's per-head terms v = bf16(relu(bf16(dot)) * w[h]) into a warp's transposition rows t0
// (position 2 c4 + j at t0 + (2 c4 + j) * kTRow): acc0 / acc1 are m-tile 0 / 1's accumulators, so this
// thread's heads are q * 8 + g, q = 0..3 (q 0: m-tile 0 row g, 1: m-tile 0 row g+8, 2: m-tile 1 row g,
// 3: m-tile 1 row g+8), head h = q * 8 + g in slot g * 4 + q of a position's row.
// relu as fmaxf(d, 0): NaN -> 0 as the reference's (d > 0 ? d : 0); -0 may stay -0, which leaves the
// +0-started sum unchanged (x + -0 == x), so the result is the same.
__device__ __forceinline__ void store_head_terms(uint16_t *t0, const float (&acc0)[4], const float (&acc1)[4],
                                                 const float (&wq)[4], int g, int c4)
{
    float v[2][4]; // [position 2c4 + j][q]
    const float *acc[2] = {acc0, acc1};
#pragma unroll
    for (int mt = 0; mt < 2; mt++) {
        const uint32_t d01 = pack_bf16x2(acc[mt][0], acc[mt][1]); // row g, positions j = 0, 1
        const uint32_t d23 = pack_bf16x2(acc[mt][2], acc[mt][3]); // row g + 8
        v[0][2 * mt] = __fmul_rn(fmaxf(bf16lo(d01), 0.0f), wq[2 * mt]);
        v[1][2 * mt] = __fmul_rn(fmaxf(bf16hi(d01), 0.0f), wq[2 * mt]);
        v[0][2 * mt + 1] = __fmul_rn(fmaxf(bf16lo(d23), 0.0f), wq[2 * mt + 1]);
        v[1][2 * mt + 1] = __fmul_rn(fmaxf(bf16hi(d23), 0.0f), wq[2 * mt + 1]);
    }
#pragma unroll
    for (int j = 0; j < 2; j++) {
        uint2 pk;
        pk.x = pack_bf16x2(v[j][0], v[j][1]);
        pk.y = pack_bf16x2(v[j][2], v[j][3]);
        *(uint2 *)(t0 + (2 * c4 + j) * kTRow + g * 4) = pk;
    }
}

// A position's score before its bf16 rounding: its transposition row's terms summed over the heads in
// order, from +0.
__device__ __forceinline__ float sum_head_terms(const uint16_t *trow)
{
    const uint4 *row = (const uint4 *)trow;
    uint4 r4[4] = {row[0], row[1], row[2], row[3]};
    const uint32_t u[16] = {r4[0].x, r4[0].y, r4[0].z, r4[0].w, r4[1].x, r4[1].y, r4[1].z, r4[1].w,
                            r4[2].x, r4[2].y, r4[2].z, r4[2].w, r4[3].x, r4[3].y, r4[3].z, r4[3].w};
    float sum = 0.0f;
#pragma unroll
    for (int h = 0; h < kHeads; h++) {
        const int slot = (h & 7) * 4 + (h >> 3);
        const uint32_t word = u[slot >> 1];
        sum = __fadd_rn(sum, (slot & 1) ? bf16hi(word) : bf16lo(word));
    }
    return sum;
}

template <int IHD>
__global__ void __launch_bounds__(kThreads, 1)
    index_scores_mma_kernel(const uint16_t *__restrict__ iq, const uint16_t *__restrict__ keys,
                            const uint16_t *__restrict__ w, int s, int width, int start_pos, int ratio,
                            int tiles_per_block, uint16_t *__restrict__ score, const int32_t *width_d = nullptr)
{
    as_d_pdl_wait();
    if (width_d) // the decode graph's live width (the grid covers `width`, the most it can be)
        width = min(width, max(0, *width_d));
    using SM = ScoreSmem<IHD>;
    constexpr int KS = IHD / 16;          // k-steps
    constexpr int CPR = IHD / 8;          // 16-byte chunks per key row
    static_assert((kTileP * CPR) % kThreads == 0, "key tile chunks must split evenly over the block");
    extern __shared__ __align__(16) uint8_t smem[];
    uint16_t *ks_base = (uint16_t *)smem;                                 // [2][kTileP][kRow]
    uint16_t *tt = (uint16_t *)(smem + SM::kKeyBytes) + 0;               // [kWarps][kTileP][kTRow]

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, c4 = lane & 3;
    const int q0 = blockIdx.x * kWarps;
    const int t = q0 + warp;
    const bool tvalid = t < s;
    const int clen_t = tvalid ? clen_of(t, start_pos, ratio, width) : 0;
    int clen_blk = 0; // largest clen of the block's queries (clen is monotonic in t, but take the max)
    for (int k = 0; k < kWarps && q0 + k < s; k++) {
        int c = clen_of(q0 + k, start_pos, ratio, width);
        clen_blk = c > clen_blk ? c : clen_blk;
    }
    const int ntiles = (width + kTileP - 1) / kTileP;
    const int tile_a = blockIdx.y * tiles_per_block;
    const int tile_b = min(ntiles, tile_a + tiles_per_block);
    // Tiles [tile_a, tile_c) hold a visible position for some query of the block.
    const int tile_c = min(tile_b, max(tile_a, (clen_blk + kTileP - 1) / kTileP));

    // -inf for the tiles nobody sees.
    if (tvalid)
        for (int p = tile_c * kTileP + lane; p < tile_b * kTileP && p < width; p += 32)
            score[(int64_t)t * width + p] = kNegInf;
    if (tile_c <= tile_a)
        return; // uniform over the block: no barrier follows

    auto load_tile = [&](int tile, int stage) {
        uint16_t *dst = ks_base + stage * kTileP * SM::kRow;
#pragma unroll
        for (int i = 0; i < kTileP * CPR / kThreads; i++) {
            int id = threadIdx.x + i * kThreads;
            int r = id / CPR, ch = id % CPR;
            int p = tile * kTileP + r;
            const uint16_t *src = keys + (int64_t)(p < width ? p : 0) * IHD + ch * 8;
            cp_async16(smem_u32(dst + r * SM::kRow + ch * 8), src, p < width ? 16 : 0);
        }
    };
    load_tile(tile_a, 0);
    cp_async_commit();

    // A fragments of iq[t] (32 heads x IHD), straight from global, and the four head weights.
    uint32_t afr[2][KS][4];
    float wq[4];
    {
        const uint16_t *qt = iq + (int64_t)(tvalid ? t : 0) * kHeads * IHD;
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int ks = 0; ks < KS; ks++) {
                const uint16_t *r0 = qt + (mt * 16 + g) * IHD + ks * 16 + 2 * c4;
                const uint16_t *r8 = r0 + 8 * IHD;
                afr[mt][ks][0] = *(const uint32_t *)r0;
                afr[mt][ks][1] = *(const uint32_t *)r8;
                afr[mt][ks][2] = *(const uint32_t *)(r0 + 8);
                afr[mt][ks][3] = *(const uint32_t *)(r8 + 8);
            }
#pragma unroll
        for (int q = 0; q < 4; q++)
            wq[q] = as_d_bf16_to_f32(w[(int64_t)(tvalid ? t : 0) * kHeads + q * 8 + g]);
    }

    uint16_t *tw = tt + warp * kTileP * kTRow; // this warp's transposition tile
    for (int tile = tile_a; tile < tile_c; tile++) {
        const int stage = (tile - tile_a) & 1;
        cp_async_wait<0>();
        __syncthreads(); // tile landed for everyone; everyone is done with the other stage
        if (tile + 1 < tile_c)
            load_tile(tile + 1, stage ^ 1);
        cp_async_commit();

        const int p0 = tile * kTileP;
        if (!tvalid || p0 >= clen_t) { // nothing visible to this query in this tile
            if (tvalid)
                for (int p = p0 + lane; p < p0 + kTileP && p < width; p += 32)
                    score[(int64_t)t * width + p] = kNegInf;
            continue;
        }

        float acc[2][8][4];
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int nt = 0; nt < 8; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    acc[mt][nt][e] = 0.0f;

        const uint16_t *kt = ks_base + stage * kTileP * SM::kRow;
        // ldmatrix.x4 for n-tiles (2np, 2np+1): lane supplies row (lane & 7) of matrix lane >> 3:
        // matrix 0: n 0-7, k 0-7; 1: n 0-7, k 8-15; 2: n 8-15, k 0-7; 3: n 8-15, k 8-15.
        const uint32_t b_lane = smem_u32(kt + ((lane >> 4) * 8 + (lane & 7)) * SM::kRow + ((lane >> 3) & 1) * 8);
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
#pragma unroll
            for (int np = 0; np < 4; np++) {
                uint32_t b0, b1, b2, b3;
                ldmatrix_x4(b0, b1, b2, b3, b_lane + (uint32_t)((np * 16 * SM::kRow + ks * 16) * 2));
#pragma unroll
                for (int mt = 0; mt < 2; mt++) {
                    mma_bf16(acc[mt][2 * np], afr[mt][ks], b0, b1);
                    mma_bf16(acc[mt][2 * np + 1], afr[mt][ks], b2, b3);
                }
            }
        }

        // the per-head terms of each n-tile, then a lane's positions summed over the heads
        __syncwarp();
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
            store_head_terms(tw + nt * 8 * kTRow, acc[0][nt], acc[1][nt], wq, g, c4);
        __syncwarp();
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int pl = lane + 32 * half, p = p0 + pl;
            const float sum = sum_head_terms(tw + pl * kTRow);
            if (p < width)
                score[(int64_t)t * width + p] = p < clen_t ? as_d_f32_to_bf16(sum) : kNegInf;
        }
    }
    cp_async_wait<0>();
}

// One query (s == 1: a decode's row), the fast path's geometry: a block per tile of 64 positions, warp
// w the positions p0 + 8w .. + 7 as one n8 tile (the mma kernel gives a block's whole tile to the
// query's one warp, 128 MMAs and the epilogue in series while seven warps wait). The fragments are the
// mma kernel's (A: iq's 32 heads, B: a key row a lane group, read straight from global, no tile in
// shared memory), the MMAs the same in the same k order, the epilogue the same terms summed over the
// heads in order: the same bits.
template <int IHD>
__global__ void __launch_bounds__(kThreads, 1)
    index_scores_row_kernel(const uint16_t *__restrict__ iq, const uint16_t *__restrict__ keys,
                            const uint16_t *__restrict__ w, int width, int start_pos, int ratio,
                            uint16_t *__restrict__ score, const int32_t *width_d = nullptr)
{
    as_d_pdl_wait();
    if (width_d)
        width = min(width, max(0, *width_d));
    constexpr int KS = IHD / 16;
    extern __shared__ __align__(16) uint8_t smem[]; // kRowSmem: a warp's [position][head slot] terms
    uint16_t(*tt)[8][kTRow] = (uint16_t(*)[8][kTRow])smem;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, c4 = lane & 3;
    const int p0 = blockIdx.x * kTileP + warp * 8;
    if (p0 >= width)
        return; // no barrier follows
    const int clen = clen_of(0, start_pos, ratio, width);
    if (p0 >= clen) {
        if (lane < 8 && p0 + lane < width)
            score[p0 + lane] = kNegInf;
        return;
    }
    // B: lane (g, c4) holds key p0 + g's channels ks * 16 + 2 c4 (+1) and + 8 (+9); past the width, 0
    const int pk = p0 + g < width ? p0 + g : 0;
    uint32_t bfr[KS][2];
#pragma unroll
    for (int ks = 0; ks < KS; ks++) {
        const uint16_t *kp = keys + (int64_t)pk * IHD + ks * 16 + 2 * c4;
        bfr[ks][0] = p0 + g < width ? *(const uint32_t *)kp : 0u;
        bfr[ks][1] = p0 + g < width ? *(const uint32_t *)(kp + 8) : 0u;
    }
    uint32_t afr[2][KS][4];
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
            const uint16_t *r0 = iq + (mt * 16 + g) * IHD + ks * 16 + 2 * c4;
            const uint16_t *r8 = r0 + 8 * IHD;
            afr[mt][ks][0] = *(const uint32_t *)r0;
            afr[mt][ks][1] = *(const uint32_t *)r8;
            afr[mt][ks][2] = *(const uint32_t *)(r0 + 8);
            afr[mt][ks][3] = *(const uint32_t *)(r8 + 8);
        }
    float wq[4];
#pragma unroll
    for (int q = 0; q < 4; q++)
        wq[q] = as_d_bf16_to_f32(w[q * 8 + g]);
    float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int ks = 0; ks < KS; ks++)
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
            mma_bf16(acc[mt], afr[mt][ks], bfr[ks][0], bfr[ks][1]);
    // the mma kernel's epilogue for its one n-tile
    store_head_terms(&tt[warp][0][0], acc[0], acc[1], wq, g, c4);
    __syncwarp();
    if (lane < 8) {
        const int p = p0 + lane;
        const float sum = sum_head_terms(&tt[warp][lane][0]);
        if (p < width)
            score[p] = p < clen ? as_d_f32_to_bf16(sum) : kNegInf;
    }
}

// Any geometry: one thread per (t, p); dots in f32 (fma, channel order), then the reference's steps.
__global__ void index_scores_scalar_kernel(const uint16_t *__restrict__ iq, const uint16_t *__restrict__ keys,
                                           const uint16_t *__restrict__ w, int s, int nh, int ihd, int width,
                                           int start_pos, int ratio, uint16_t *__restrict__ score,
                                           const int32_t *width_d = nullptr)
{
    as_d_pdl_wait();
    if (width_d) // the decode graph's live width (at most `width`)
        width = min(width, max(0, *width_d));
    const int64_t n = (int64_t)s * width;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int t = (int)(i / width), p = (int)(i % width);
        if (p >= clen_of(t, start_pos, ratio, width)) {
            score[i] = kNegInf;
            continue;
        }
        const uint16_t *kp = keys + (int64_t)p * ihd;
        float sum = 0.0f;
        for (int h = 0; h < nh; h++) {
            const uint16_t *qh = iq + ((int64_t)t * nh + h) * ihd;
            float dot = 0.0f;
            for (int k = 0; k < ihd; k++)
                dot = fmaf(as_d_bf16_to_f32(qh[k]), as_d_bf16_to_f32(kp[k]), dot);
            float d = as_d_bf16(dot);
            float r = d > 0.0f ? d : 0.0f;
            sum = __fadd_rn(sum, as_d_bf16(__fmul_rn(r, as_d_bf16_to_f32(w[(int64_t)t * nh + h]))));
        }
        score[i] = as_d_f32_to_bf16(sum);
    }
}

#ifndef AS_EMU // host side (tools/emu runs the kernels above on the CPU)
template <int IHD> int set_smem_attr()
{
    return as_allow_dynamic_smem<index_scores_mma_kernel<IHD>>(ScoreSmem<IHD>::kBytes);
}

template <int IHD>
int launch_mma(const uint16_t *iq, const uint16_t *keys, const uint16_t *w, int s, int width, int start_pos, int ratio,
               uint16_t *score, const int32_t *width_d, cudaStream_t st)
{
    if (s == 1) { // one query (a decode's): index_scores_row_kernel
        const int64_t blocks = ((int64_t)width + kTileP - 1) / kTileP;
        as_launch(index_scores_row_kernel<IHD>, (unsigned)blocks, kThreads, kRowSmem, st, iq, keys, w, width,
                  start_pos, ratio, score, width_d);
        return AS_LAUNCH_RESULT();
    }
    const int smem = ScoreSmem<IHD>::kBytes;
    const int arc = set_smem_attr<IHD>();
    if (arc)
        return arc;
    const int qgroups = (s + kWarps - 1) / kWarps;
    const int ntiles = (width + kTileP - 1) / kTileP;
    const int target = 4 * as_sm_count();
    const int ysplit = (target + qgroups - 1) / qgroups; // position chunks wanted per query group
    int tpb = (ntiles + ysplit - 1) / ysplit;
    tpb = tpb < 1 ? 1 : tpb > 16 ? 16 : tpb;
    const int ychunks = (ntiles + tpb - 1) / tpb;
    if (qgroups > 0x7fffffff || ychunks > 65535)
        return (int)cudaErrorInvalidValue;
    dim3 grid((unsigned)qgroups, (unsigned)ychunks);
    as_launch(index_scores_mma_kernel<IHD>, grid, kThreads, smem, st, iq, keys, w, s, width, start_pos, ratio, tpb, score,
              width_d);
    return AS_LAUNCH_RESULT();
}

bool aligned(const void *p, unsigned a) { return ((uintptr_t)p & (a - 1)) == 0; }

#endif // AS_EMU
} // namespace
#ifndef AS_EMU

namespace {
// width_d: the decode variant's live width (the launch covers `width`, its most).
int index_scores_impl(const as_bf16_t *iq, const as_bf16_t *keys, const as_bf16_t *w, int s, int nh, int ihd,
                      int width, int start_pos, int ratio, as_bf16_t *score, int force_scalar,
                      const int32_t *width_d, cudaStream_t st)
{
    if (s < 0 || nh <= 0 || ihd <= 0 || width < 0 || start_pos < 0 || ratio <= 0)
        return (int)cudaErrorInvalidValue;
    if (s == 0 || width == 0)
        return 0;
    if (!iq || !keys || !w || !score)
        return (int)cudaErrorInvalidValue;
    if ((int64_t)s * nh * ihd > ((int64_t)1 << 40) || (int64_t)s * width > ((int64_t)1 << 40))
        return (int)cudaErrorInvalidValue;
    const bool fast = !force_scalar && nh == kHeads && (ihd == 64 || ihd == 128) && aligned(keys, 16) &&
                      aligned(iq, 4);
    if (fast)
        return ihd == 128 ? launch_mma<128>(iq, keys, w, s, width, start_pos, ratio, score, width_d, st)
                          : launch_mma<64>(iq, keys, w, s, width, start_pos, ratio, score, width_d, st);
    const int64_t n = (int64_t)s * width;
    const int blocks = (int)((n + 255) / 256 < 8192 ? (n + 255) / 256 : 8192);
    as_launch(index_scores_scalar_kernel, blocks, 256, 0, st, iq, keys, w, s, nh, ihd, width, start_pos, ratio, score,
              width_d);
    return AS_LAUNCH_RESULT();
}
} // namespace

// force_scalar (benchmark / tests only): 1 takes the scalar kernel whatever the geometry.
extern "C" int as_k_index_scores_path(const as_bf16_t *iq, const as_bf16_t *keys, const as_bf16_t *w, int s, int nh,
                                      int ihd, int width, int start_pos, int ratio, as_bf16_t *score, int force_scalar,
                                      cudaStream_t st)
{
    return index_scores_impl(iq, keys, w, s, nh, ihd, width, start_pos, ratio, score, force_scalar, nullptr, st);
}

// The decode variant: start_pos > 0 (nothing masked), the live width read from width_d,
// the launch sized for max_width. Each score is computed by the same code as in the by-value launch
// at that width (a position's sum over heads never depends on the grid), so the results are the same.
extern "C" int as_k_index_scores_decode(const as_bf16_t *iq, const as_bf16_t *keys, const as_bf16_t *w, int s, int nh,
                                        int ihd, int max_width, const int32_t *width_d, int ratio, as_bf16_t *score,
                                        cudaStream_t st)
{
    if (!width_d)
        return (int)cudaErrorInvalidValue;
    return index_scores_impl(iq, keys, w, s, nh, ihd, max_width, 1, ratio, score, 0, width_d, st);
}

// Raises the tensor-core kernel's shared-memory limit now (before a graph capture).
extern "C" int as_k_index_scores_prepare(int ihd)
{
    return ihd == 128 ? set_smem_attr<128>() : ihd == 64 ? set_smem_attr<64>() : 0;
}

extern "C" int as_k_index_scores(const as_bf16_t *iq, const as_bf16_t *keys, const as_bf16_t *w, int s, int nh,
                                 int ihd, int width, int start_pos, int ratio, as_bf16_t *score, cudaStream_t st)
{
    return as_k_index_scores_path(iq, keys, w, s, nh, ihd, width, start_pos, ratio, score, 0, st);
}
#endif // AS_EMU
