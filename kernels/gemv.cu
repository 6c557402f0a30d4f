// Decode GEMV (twin: ref/linear.c + ref/gemv.c, test: tests/gpu_gemv.c, bench: bench/kernels_bench.cu).
//
//   y_b[t][o] = sum_i x_b[t][i] * W_b[o][i]      t < m <= 8, o < n_out, b < batch
//
// Memory bound: every weight byte is read once, so the kernel is a stream over W. Design:
//   * a "row group" of R consecutive output rows is handled by W_WARPS warps (1, 2, 4 or 8) that
//     split the input dimension; a block has 8 warps = 8 / W_WARPS row groups; grid.y = batch.
//   * the input is read in chunks of 8 elements: 16 bytes of bf16 weights (one ld.global.nc v4,
//     L1::no_allocate: weights are streamed, x stays in L1) or 2 x 16 bytes of f32 weights; x's
//     8 bf16 per token row come in one 16-byte __ldg (x is tiny and stays in L1/L2). Lane l of a
//     group takes chunks l, l + 32 W_WARPS, ...; the loop is unrolled 2x, so R * 2 independent
//     weight loads are in flight per thread per iteration.
//   * f32 accumulation acc[R][M] in registers (M = m rounded up to 1, 2, 4, 8: a template
//     parameter so the array stays in registers); the n_in % 8 tail runs scalar in lanes 0..6.
//   * reduction: warp xor-shuffle, then (W_WARPS > 1) shared memory across the group's warps in
//     warp order; lane j < R * M of the group's first warp writes output j (bf16 RNE or f32).
// The vector path needs 16-byte aligned rows: W, x (and the batch strides, ldw, ldx) in elements
// multiples of 8 (4 for... f32 weights: also 8, since a chunk is 8 elements = 32 bytes, read as two
// 16-byte loads). Anything else takes gemv_scalar_kernel: one warp per output row, element loads.
//
//   * one wave: the launch makes at most as many blocks as are resident at once, each looping over row
//     sets, and a block's first weight loads go out before its PDL wait; the store can add a residual or
//     rotate q's RoPE pairs (gemv_epilogue.cuh).
//   * e4m3 weights at one token row (the decode) take gemv_e4m3_m1_kernel: the same sums, its loads a
//     step ahead of them.
// Launch configuration (R, W_WARPS) comes from pick_config() (bench/kernels_bench.cu sweeps the
// alternatives through as_k_gemv_bf16_cfg / as_k_gemv_f32w_cfg).
#include <stdio.h>
#include <stdlib.h>

#include "kernels/common.cuh"
#include "kernels/e4m3.cuh"
#include "kernels/gemv_epilogue.cuh"
#include "kernels/kernels.h"
#include "kernels/rmsnorm_row.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kUnroll = 2;

// 8 weights of one chunk, widened to f32 (widen below).
template <typename TW> struct WChunk;

template <> struct WChunk<uint16_t> {
    uint4 v;
    __device__ __forceinline__ void load(const uint16_t *p) { v = as_d_ld_stream16(p); }
    __device__ __forceinline__ float get(int e) const
    {
        uint32_t u = e < 2 ? v.x : e < 4 ? v.y : e < 6 ? v.z : v.w;
        return (e & 1) ? __uint_as_float(u & 0xffff0000u) : __uint_as_float(u << 16);
    }
};

// e4m3 codes of a fp8-form weight (one byte a weight), 8 a chunk.
template <> struct WChunk<uint8_t> {
    uint2 v;
    __device__ __forceinline__ void load(const uint8_t *p) { v = ase4m3::ld_stream8(p); }
};

template <> struct WChunk<float> {
    uint4 a, b;
    __device__ __forceinline__ void load(const float *p)
    {
        a = as_d_ld_stream16(p);
        b = as_d_ld_stream16(p + 4);
    }
    __device__ __forceinline__ float get(int e) const
    {
        uint32_t u = e == 0 ? a.x : e == 1 ? a.y : e == 2 ? a.z : e == 3 ? a.w : e == 4 ? b.x : e == 5 ? b.y : e == 6 ? b.z : b.w;
        return __uint_as_float(u);
    }
};

// A chunk's 8 weights as f32: bf16 and f32 weights as they are; e4m3 codes times s256 / 256 (s256: the
// chunk's block scale times 256, chunk_scale).
template <typename TW> __device__ __forceinline__ void widen(const WChunk<TW> &c, float, float (&f)[8])
{
#pragma unroll
    for (int e = 0; e < 8; e++)
        f[e] = c.get(e);
}
__device__ __forceinline__ void widen(const WChunk<uint8_t> &c, float s256, float (&f)[8])
{
    ase4m3::e4m3x4_scaled(c.v.x, s256, f);
    ase4m3::e4m3x4_scaled(c.v.y, s256, f + 4);
}

// 8 bf16 activations of one chunk (16 bytes, cached: x is tiny and reused by every row), widened.
__device__ __forceinline__ void x_chunk(const uint16_t *p, float (&xf)[8])
{
    const uint4 xv = __ldg((const uint4 *)p);
    const uint32_t u[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        xf[2 * i] = __uint_as_float(u[i] << 16);
        xf[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
    }
}

__device__ __forceinline__ float w_scalar(const uint16_t *p, float) { return as_d_bf16_to_f32(*p); }
__device__ __forceinline__ float w_scalar(const float *p, float) { return *p; }
__device__ __forceinline__ float w_scalar(const uint8_t *p, float scale) { return ase4m3::e4m3_scaled(*p, 256.0f * scale); }

struct GemvArgs {
    const void *W;
    int64_t ldw, strideW;
    int n_out, n_in;
    const uint16_t *x;
    int64_t ldx, strideX;
    int m;
    void *y;
    int64_t ldy, strideY;
    int y_f32;
    uint16_t *res; // batch 1, bf16 y: res[t][o] = bf16(res[t][o] + y[t][o]) (rows ldres apart)
    int64_t ldres;
    AsDRope rope;  // rope.rd > 0: q's RoPE before the store (vector kernel, R even, batch 1, bf16 y)
    // norm.ctr: the RMSNorm of the finished row (res when given, else y; m = 1, batch 1) into norm.y
    // with weights norm.w, by the block that finishes last (norm.ctr counts the blocks; 0 before and
    // after the launch)
    struct {
        const float *w;
        uint16_t *y;
        float eps;
        unsigned *ctr;
    } norm;
    // e4m3 weights (TW uint8_t): the f32 scale of each 32 x 32 block, ws[o / 32][i / 32] rows ldws apart,
    // batch b's at ws + b * stride_ws (a power of two each: the launcher's caller checks)
    const float *ws;
    int64_t ldws, stride_ws;
};

// The block scale of rows row0.. (one 32-row block: R divides 32) at chunk c, times 256 for
// e4m3x4_scaled; 1 for the other weight types.
template <typename TW>
__device__ __forceinline__ float chunk_scale(const float *srow, int c)
{
    if constexpr (sizeof(TW) == 1)
        return srow[c >> 2] * 256.0f;
    else
        return (void)srow, (void)c, 1.0f;
}

// One block computes the row sets blockIdx.x, blockIdx.x + gridDim.x, ... of batch blockIdx.y (a row
// set: groups_per_block row groups of R rows; the launch makes at most as many blocks as fit on the
// GPU at once, so there is one wave and no block starts late). The block's first batch of weight
// loads is issued before the PDL wait: the weights stream in while the previous
// kernel finishes (they must not be what that kernel writes; the model's weights never are).
template <typename TW, int R, int M>
__global__ void __launch_bounds__(kThreads, M == 1 && sizeof(TW) <= 2 ? 3 : 1) gemv_vec_kernel(GemvArgs a, int w_warps)
{
    // e4m3 chunks are 8 bytes, not 16: twice the chunks in flight for the same bytes (the order of the
    // sum is the lane's chunks in turn either way, so the unroll changes no bit)
    constexpr int kU = sizeof(TW) == 1 ? 2 * kUnroll : kUnroll;
    __shared__ float red[kWarps][R * M];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int groups_per_block = kWarps / w_warps;
    const int group = warp / w_warps, wig = warp % w_warps; // warp in group
    const int li = wig * 32 + lane, L = 32 * w_warps;       // lane in group, lanes per group
    const int64_t b = blockIdx.y;
    const int row_sets = (a.n_out + R * groups_per_block - 1) / (R * groups_per_block);
    const int nchunks = a.n_in >> 3;
    const bool unrolled = li + (kU - 1) * L < nchunks; // at least one pass of the unrolled loop
    const TW *Wb = (const TW *)a.W + b * a.strideW;
    const uint16_t *xb = a.x + b * a.strideX;

    int set = blockIdx.x;
    const TW *wrow[R];
    const float *srow = nullptr; // e4m3: the group's row of block scales
    auto point_rows = [&](int row0) {
#pragma unroll
        for (int r = 0; r < R; r++) {
            int o = row0 + r < a.n_out ? row0 + r : a.n_out - 1; // clamped: loaded, never stored
            wrow[r] = Wb + (int64_t)o * a.ldw;
        }
        if constexpr (sizeof(TW) == 1)
            srow = a.ws + b * a.stride_ws + (int64_t)(row0 >> 5) * a.ldws;
    };
    WChunk<TW> w[kU][R]; // one pass's weights; the first pass's may be loaded before the wait
    float ws[kU];        // their block scales (e4m3)
    auto load_pass = [&](int c) {
#pragma unroll
        for (int u = 0; u < kU; u++) {
#pragma unroll
            for (int r = 0; r < R; r++)
                w[u][r].load(wrow[r] + (int64_t)(c + u * L) * 8);
            ws[u] = chunk_scale<TW>(srow, c + u * L);
        }
    };
    bool loaded = unrolled && set < row_sets;
    if (loaded) {
        point_rows((set * groups_per_block + group) * R);
        load_pass(li);
    }
    as_d_pdl_wait();

    // Token rows t >= m (M rounds m up) read row 0 again: computed, never stored.
    const uint16_t *xrow[M];
#pragma unroll
    for (int t = 0; t < M; t++)
        xrow[t] = xb + (int64_t)(t < a.m ? t : 0) * a.ldx;

    for (; set < row_sets; set += gridDim.x) {
        const int row0 = (set * groups_per_block + group) * R;
        point_rows(row0);
        float acc[R][M];
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int t = 0; t < M; t++)
                acc[r][t] = 0.0f;

        int c = li;
        for (; c + (kU - 1) * L < nchunks; c += kU * L) {
            if (!loaded)
                load_pass(c);
            loaded = false;
#pragma unroll
            for (int u = 0; u < kU; u++) {
                float wf[R][8];
#pragma unroll
                for (int r = 0; r < R; r++)
                    widen(w[u][r], ws[u], wf[r]);
#pragma unroll
                for (int t = 0; t < M; t++) {
                    float xf[8];
                    x_chunk(xrow[t] + (int64_t)(c + u * L) * 8, xf);
#pragma unroll
                    for (int r = 0; r < R; r++)
#pragma unroll
                        for (int e = 0; e < 8; e++)
                            acc[r][t] = fmaf(wf[r][e], xf[e], acc[r][t]);
                }
            }
        }
        for (; c < nchunks; c += L) { // at most kU - 1 chunks left for this lane
            float wf[R][8];
#pragma unroll
            for (int r = 0; r < R; r++) {
                WChunk<TW> wl;
                wl.load(wrow[r] + (int64_t)c * 8);
                widen(wl, chunk_scale<TW>(srow, c), wf[r]);
            }
#pragma unroll
            for (int t = 0; t < M; t++) {
                float xf[8];
                x_chunk(xrow[t] + (int64_t)c * 8, xf);
#pragma unroll
                for (int r = 0; r < R; r++)
#pragma unroll
                    for (int e = 0; e < 8; e++)
                        acc[r][t] = fmaf(wf[r][e], xf[e], acc[r][t]);
            }
        }
        // Scalar tail: the n_in % 8 last elements, one per lane (bf16 and f32 weights: e4m3 rows are whole
        // 32-wide blocks).
        const int tail0 = nchunks << 3;
        if (li < a.n_in - tail0) {
            const int i = tail0 + li;
#pragma unroll
            for (int r = 0; r < R; r++) {
                float wv = w_scalar(wrow[r] + i, 1.0f);
#pragma unroll
                for (int t = 0; t < M; t++)
                    acc[r][t] = fmaf(wv, as_d_bf16_to_f32(xrow[t][i]), acc[r][t]);
            }
        }

        as_d_group_sum_store<R, M>(acc, red, w_warps, row0, b, a, a.res, a.ldres, a.rope.rd ? &a.rope : nullptr);
        __syncthreads(); // red is written again by the next row set
    }
    if (M == 1 && a.norm.ctr)
        as_d_gemv_norm_after(a);
}

// e4m3 weights, one token row (the decode): a lane's chunks of a row set go in steps of KU, each step's
// loads issued one step ahead (the next row set's first step while this one's last is summed), and a
// lane past the row's last chunk skips it (no serial tail). The same lanes sum the same chunks in the
// same order as gemv_vec_kernel, so the bits are the bf16 GEMV's of the dequantised weight. The codes
// widen on the conversion unit (e4m3x4_cvt): measured faster than the integer widening, whose shifts
// and masks compete with the sums for issue slots (bench/RESULTS.md).
template <int R, int KU>
__global__ void __launch_bounds__(kThreads, 2) gemv_e4m3_m1_kernel(GemvArgs a, int w_warps)
{
    __shared__ float red[kWarps][R];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int groups_per_block = kWarps / w_warps;
    const int group = warp / w_warps, wig = warp % w_warps;
    const int li = wig * 32 + lane, L = 32 * w_warps;
    const int64_t b = blockIdx.y;
    const int row_sets = (a.n_out + R * groups_per_block - 1) / (R * groups_per_block);
    const int nchunks = a.n_in >> 3;
    const int steps = (nchunks + KU * L - 1) / (KU * L);
    const uint8_t *Wb = (const uint8_t *)a.W + b * a.strideW;
    const float *Sb = a.ws + b * a.stride_ws;
    const uint16_t *xb = a.x + b * a.strideX;

    struct Step { // one step's codes and their block scales
        uint2 w[KU][R];
        float s[KU];
    };
    auto load = [&](Step &B, int set, int s) {
        const int row0 = (set * groups_per_block + group) * R;
        const uint8_t *wr[R];
#pragma unroll
        for (int r = 0; r < R; r++) // clamped: loaded, never stored
            wr[r] = Wb + (int64_t)(row0 + r < a.n_out ? row0 + r : a.n_out - 1) * a.ldw;
        const float *srow = Sb + (int64_t)(row0 >> 5) * a.ldws;
#pragma unroll
        for (int u = 0; u < KU; u++) {
            const int c = li + (s * KU + u) * L;
            if (c < nchunks) {
#pragma unroll
                for (int r = 0; r < R; r++)
                    B.w[u][r] = ase4m3::ld_stream8(wr[r] + (int64_t)c * 8);
                B.s[u] = srow[c >> 2];
            }
        }
    };
    float acc[R][1];
#pragma unroll
    for (int r = 0; r < R; r++)
        acc[r][0] = 0.0f;
    auto sum = [&](const Step &B, int s) {
#pragma unroll
        for (int u = 0; u < KU; u++) {
            const int c = li + (s * KU + u) * L;
            if (c < nchunks) {
                float xf[8];
                x_chunk(xb + (int64_t)c * 8, xf);
#pragma unroll
                for (int r = 0; r < R; r++) {
                    float wf[8];
                    ase4m3::e4m3x4_cvt(B.w[u][r].x, B.s[u], wf);
                    ase4m3::e4m3x4_cvt(B.w[u][r].y, B.s[u], wf + 4);
#pragma unroll
                    for (int e = 0; e < 8; e++)
                        acc[r][0] = fmaf(wf[e], xf[e], acc[r][0]);
                }
            }
        }
    };
    Step A, B;
    int set = blockIdx.x, s = 0;
    if (set < row_sets)
        load(A, set, 0); // the weights, before the wait (never what the previous kernel writes)
    as_d_pdl_wait();
    // One step: the next position's loads into nxt, then cur summed (and stored at a row set's end).
    // False when this block has no row set left.
    auto step = [&](Step &cur, Step &nxt) {
        int nset = set, ns = s + 1;
        if (ns == steps)
            ns = 0, nset += gridDim.x;
        if (nset < row_sets)
            load(nxt, nset, ns);
        sum(cur, s);
        if (s == steps - 1) {
            const int row0 = (set * groups_per_block + group) * R;
            as_d_group_sum_store<R, 1>(acc, red, w_warps, row0, b, a, a.res, a.ldres, a.rope.rd ? &a.rope : nullptr);
            __syncthreads(); // red is written again by the next row set
#pragma unroll
            for (int r = 0; r < R; r++)
                acc[r][0] = 0.0f;
        }
        set = nset, s = ns;
        return set < row_sets;
    };
    if (set < row_sets)
        while (step(A, B) && step(B, A)) {
        }
    if (a.norm.ctr)
        as_d_gemv_norm_after(a);
}

// Any alignment: one warp per (batch, output row), element loads, all m token rows.
template <typename TW>
__global__ void __launch_bounds__(kThreads) gemv_scalar_kernel(GemvArgs a)
{
    as_d_pdl_wait();
    const int lane = threadIdx.x & 31;
    const int o = (int)blockIdx.x * kWarps + (threadIdx.x >> 5);
    const int64_t b = blockIdx.y;
    if (o >= a.n_out)
        return;
    const TW *wr = (const TW *)a.W + b * a.strideW + (int64_t)o * a.ldw;
    const uint16_t *xb = a.x + b * a.strideX;
    float acc[8];
#pragma unroll
    for (int t = 0; t < 8; t++)
        acc[t] = 0.0f;
    const float *srow = sizeof(TW) == 1 ? a.ws + b * a.stride_ws + (int64_t)(o >> 5) * a.ldws : nullptr;
    for (int i = lane; i < a.n_in; i += 32) {
        float wv = w_scalar(wr + i, sizeof(TW) == 1 ? srow[i >> 5] : 1.0f);
#pragma unroll
        for (int t = 0; t < 8; t++)
            if (t < a.m)
                acc[t] = fmaf(wv, as_d_bf16_to_f32(xb[(int64_t)t * a.ldx + i]), acc[t]);
    }
#pragma unroll
    for (int t = 0; t < 8; t++) {
        float v = as_d_warp_sum(acc[t]);
        if (lane == 0 && t < a.m) {
            const int64_t off = b * a.strideY + (int64_t)t * a.ldy + o;
            if (a.y_f32) {
                ((float *)a.y)[off] = v;
            } else {
                const uint16_t y = as_d_f32_to_bf16(v);
                ((uint16_t *)a.y)[off] = y;
                if (a.res)
                    as_d_residual_store(a.res + (int64_t)t * a.ldres + o, y);
            }
        }
    }
}

#ifndef AS_EMU // host side (tools/emu runs the kernels above on the CPU)
// R rows per group, W warps per group: enough warps in flight to cover HBM latency (about 32 per
// SM), each lane at most ~8 chunks per row, and no lane without a chunk where avoidable.
// resident: the blocks resident at once (the one-wave launch's grid cap), 0 for no one-wave widening.
void pick_config(int n_out, int n_in, int batch, int64_t resident, int *R, int *W)
{
    const int64_t chunks = n_in / 8;
    const int64_t target = (int64_t)as_sm_count() * 32;
    int r = 4, w = 1;
    while (w < 8 && chunks > (int64_t)32 * w * 8)
        w *= 2;
    for (;;) {
        int64_t warps = (int64_t)batch * ((n_out + r - 1) / r) * w;
        if (warps >= target)
            break;
        if (w < 8 && chunks >= (int64_t)32 * 2 * w * 2)
            w *= 2;
        else if (r > 1)
            r /= 2;
        else
            break;
    }
    // One wave: with W = 8 a block holds one row group, and row sets beyond the resident blocks make those
    // blocks take a second pass, a memory latency more on a small (latency-bound) GEMV. When most blocks
    // would (over 1.5 row sets a resident block), wider row groups take one pass of more loads instead
    // (the same W: the same lanes sum the same chunks, so the same bits). Measured in the decode graph:
    // faster for wq_a (640 row sets on 396 resident blocks); wkv (512 row sets) slower wider, so the
    // threshold leaves it at R1.
    if (resident > 0 && w == 8 && r < 4) {
        const int64_t sets = (int64_t)batch * ((n_out + r - 1) / r);
        if (2 * sets > 3 * resident && (int64_t)batch * ((n_out + 2 * r - 1) / (2 * r)) <= resident)
            r *= 2;
    }
    // Measured exceptions, flash's shapes where the decode graph ran faster off the rule (alternated
    // rounds, bench/RESULTS.md; kbench's (R, W) sweep had picked them): wo_b 5120x8192 at W = 8 (4
    // chunks a lane, not 8) and the indexer's wq_b 4096x1280 at R2 W1 (not R1 W2). Each W sums a row in
    // its own order: the engine's bits, not the rule's.
    static const struct {
        int out, in, r, w;
    } measured[] = {{5120, 8192, 4, 8}, {4096, 1280, 2, 1}};
    for (const auto &m : measured)
        if (m.out == n_out && m.in == n_in) {
            r = m.r;
            w = m.w;
        }
    *R = r;
    *W = w;
}

template <auto Kernel> static int read_blocks_per_sm(int dev)
{
    (void)dev; // the current device's: as_per_device caches it per device
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, Kernel, kThreads, 0) != cudaSuccess)
        return 0;
    return n;
}

// Kernel's blocks resident at once on the GPU (its occupancy): a launch makes at most that many, each
// looping over the row sets (one wave).
template <auto Kernel> int64_t resident_blocks()
{
    return (int64_t)as_per_device<read_blocks_per_sm<Kernel>>(1) * as_sm_count();
}

// room: resident blocks left free beside the launch (its grid at most all - room, at least one block a
// batch), so that a kernel launched beside it finds SMs with space (the engine's sel_room knob,
// engine/decode_schedule.c).
template <auto Kernel> int grid_x(int64_t row_sets, int batch, int room)
{
    const int64_t all = resident_blocks<Kernel>();
    if (!all)
        return (int)row_sets;
    const int64_t cap = (all - room) / batch;
    return (int)(row_sets < cap ? row_sets : cap > 0 ? cap : 1);
}

// The bf16 m = 1 kernel's (its occupancy is the same for every R): pick_config's one-wave rule.
int64_t resident_blocks_bf16_m1() { return resident_blocks<gemv_vec_kernel<uint16_t, 4, 1>>(); }

extern "C" int64_t as_k_gemv_bf16_resident_blocks(void) { return resident_blocks_bf16_m1(); }

template <auto Kernel> int launch_vec(GemvArgs a, int64_t row_sets, int batch, int w_warps, int room, cudaStream_t st)
{
    dim3 grid((unsigned)grid_x<Kernel>(row_sets, batch, room), (unsigned)batch);
    as_launch(Kernel, grid, kThreads, 0, st, a, w_warps);
    return AS_LAUNCH_RESULT();
}

// Row sets of a launch: groups of R rows, kWarps / w_warps groups a block.
int64_t row_sets_of(int n_out, int R, int w_warps)
{
    const int groups_per_block = kWarps / w_warps;
    return ((int64_t)(n_out + R - 1) / R + groups_per_block - 1) / groups_per_block;
}

template <typename TW, int R>
int launch_vec_m(const GemvArgs &a, int batch, int w_warps, int room, cudaStream_t st)
{
    const int64_t row_sets = row_sets_of(a.n_out, R, w_warps);
    if constexpr (sizeof(TW) != 1) // e4m3 at one token row: gemv_e4m3_m1_kernel (gemv_launch)
        if (a.m <= 1)
            return launch_vec<gemv_vec_kernel<TW, R, 1>>(a, row_sets, batch, w_warps, room, st);
    if (a.m <= 2)
        return launch_vec<gemv_vec_kernel<TW, R, 2>>(a, row_sets, batch, w_warps, room, st);
    if (a.m <= 4)
        return launch_vec<gemv_vec_kernel<TW, R, 4>>(a, row_sets, batch, w_warps, room, st);
    return launch_vec<gemv_vec_kernel<TW, R, 8>>(a, row_sets, batch, w_warps, room, st);
}

// 16-byte rows for the vector path: W rows of 8 bf16 / 2 x 4 f32, x rows of 8 bf16.
bool vector_rows(const GemvArgs &a, int batch)
{
    return as_aligned16(a.W) && as_aligned16(a.x) && a.ldw % 8 == 0 && a.ldx % 8 == 0 &&
           (batch == 1 || (a.strideW % 8 == 0 && a.strideX % 8 == 0));
}

// R = 0 / W = 0: pick_config; room: resident blocks left free (grid_x). Returns cudaErrorInvalidValue
// for nonsense sizes.
template <typename TW>
int gemv_launch(const GemvArgs &a, int batch, int R, int W, cudaStream_t st, int room = 0)
{
    if (a.n_out < 0 || a.n_in < 0 || a.m < 0 || a.m > 8 || batch < 0)
        return (int)cudaErrorInvalidValue;
    if (a.n_out == 0 || a.m == 0 || batch == 0)
        return 0;
    if (a.n_in == 0 || !a.W || !a.x || !a.y || a.ldw < a.n_in || a.ldx < a.n_in || a.ldy < a.n_out)
        return (int)cudaErrorInvalidValue;
    if (batch > 1 && (a.strideW < 0 || a.strideX < 0 || a.strideY < 0))
        return (int)cudaErrorInvalidValue;
    if (batch > 65535 || a.ldw > ((int64_t)1 << 40) || a.ldx > ((int64_t)1 << 40))
        return (int)cudaErrorInvalidValue;
    if (a.res && (batch != 1 || a.y_f32 || a.ldres < a.n_out))
        return (int)cudaErrorInvalidValue;
    if (R != 0 && R != 1 && R != 2 && R != 4)
        return (int)cudaErrorInvalidValue;
    if (W != 0 && W != 1 && W != 2 && W != 4 && W != 8)
        return (int)cudaErrorInvalidValue;
    if (sizeof(TW) == 1 && (!a.ws || a.n_in % 32 || a.ldws < a.n_in / 32 || (batch > 1 && a.stride_ws < 0)))
        return (int)cudaErrorInvalidValue; // e4m3 rows are whole 32-wide blocks, each with its scale
    if (a.rope.rd && (batch != 1 || a.y_f32 || !vector_rows(a, batch)))
        return (int)cudaErrorInvalidValue; // the caller rotates with as_k_rope instead
    if (a.norm.ctr && (batch != 1 || a.m != 1 || a.y_f32 || a.rope.rd || !vector_rows(a, batch)))
        return (int)cudaErrorInvalidValue; // as_k_gemv_bf16_norm launches as_k_rmsnorm instead
    if (!vector_rows(a, batch)) {
        dim3 grid((unsigned)((a.n_out + kWarps - 1) / kWarps), (unsigned)batch);
        as_launch(gemv_scalar_kernel<TW>, grid, kThreads, 0, st, a);
        return AS_LAUNCH_RESULT();
    }
    int r = R, w = W;
    if (!r || !w) {
        int pr, pw;
        // e4m3 weights take the bf16 weights' W (the same lanes sum the same chunks: the same bits as the
        // bf16 GEMV of the dequantised weight); their decode kernel takes its own R (below)
        const int64_t resident = a.m == 1 && sizeof(TW) == 2 ? resident_blocks_bf16_m1() : 0;
        pick_config(a.n_out, a.n_in, batch, resident, &pr, &pw);
        if (!r)
            r = pr;
        if (!w)
            w = pw;
    }
    if (a.rope.rd && r < 2)
        r = 2; // a RoPE pair's two rows in one group
    if constexpr (sizeof(TW) == 1)
        if (a.m == 1) { // the decode's kernel: four rows a group unless asked (the benchmark's sweep)
            const int rr = R ? r : 4;
            const int64_t row_sets = row_sets_of(a.n_out, rr, w);
            switch (rr) {
            case 1: return launch_vec<gemv_e4m3_m1_kernel<1, 2>>(a, row_sets, batch, w, room, st);
            case 2: return launch_vec<gemv_e4m3_m1_kernel<2, 2>>(a, row_sets, batch, w, room, st);
            default: return launch_vec<gemv_e4m3_m1_kernel<4, 2>>(a, row_sets, batch, w, room, st);
            }
        }
    switch (r) {
    case 1: return launch_vec_m<TW, 1>(a, batch, w, room, st);
    case 2: return launch_vec_m<TW, 2>(a, batch, w, room, st);
    default: return launch_vec_m<TW, 4>(a, batch, w, room, st);
    }
}

#endif // AS_EMU
} // namespace
#ifndef AS_EMU

// Explicit configuration (R rows per group in {1, 2, 4}, W warps per group in {1, 2, 4, 8}; 0 =
// automatic) for the micro-benchmark; not part of kernels.h.
extern "C" int as_k_gemv_bf16_cfg(const as_bf16_t *W, int64_t ldw, int64_t strideW, int n_out, int n_in,
                                  const as_bf16_t *x, int64_t ldx, int64_t strideX, int m, void *y, int64_t ldy,
                                  int64_t strideY, int y_f32, int batch, int R, int Wn, cudaStream_t st)
{
    GemvArgs a{W, ldw, strideW, n_out, n_in, x, ldx, strideX, m, y, ldy, strideY, y_f32 ? 1 : 0, nullptr, 0, {}, {}, nullptr, 0, 0};
    return gemv_launch<uint16_t>(a, batch, R, Wn, st);
}

extern "C" int as_k_gemv_f32w_cfg(const float *W, int64_t ldw, int n_out, int n_in, const as_bf16_t *x, int64_t ldx,
                                  int m, float *y, int64_t ldy, int R, int Wn, cudaStream_t st)
{
    GemvArgs a{W, ldw, 0, n_out, n_in, x, ldx, 0, m, y, ldy, 0, 1, nullptr, 0, {}, {}, nullptr, 0, 0};
    return gemv_launch<float>(a, 1, R, Wn, st);
}

// Which (R, W) the automatic choice takes (printed by the benchmark).
extern "C" void as_k_gemv_pick_config(int n_out, int n_in, int batch, int *R, int *W)
{
    pick_config(n_out, n_in, batch, resident_blocks_bf16_m1(), R, W); // m = 1, bf16: the decode's
}

extern "C" int as_k_gemv_bf16(const as_bf16_t *W, int64_t ldw, int64_t strideW, int n_out, int n_in,
                              const as_bf16_t *x, int64_t ldx, int64_t strideX, int m, void *y, int64_t ldy,
                              int64_t strideY, int y_f32, int batch, cudaStream_t st)
{
    return as_k_gemv_bf16_cfg(W, ldw, strideW, n_out, n_in, x, ldx, strideX, m, y, ldy, strideY, y_f32, batch, 0, 0,
                              st);
}

namespace {
// The fused forms, for bf16 and e4m3 weights alike (a: the plain GEMV's arguments, batch 1).
template <typename TW> int gemv_residual(GemvArgs a, as_bf16_t *h, int64_t ldh, cudaStream_t st)
{
    if (!h)
        return (int)cudaErrorInvalidValue;
    a.res = h, a.ldres = ldh;
    return gemv_launch<TW>(a, 1, 0, 0, st);
}

template <typename TW>
int gemv_rope(GemvArgs a, int heads, int hd, int rd, int pos0, const int32_t *pos, const float *cos_t,
              const float *sin_t, int inverse, int room, cudaStream_t st)
{
    // as_k_rope's refusals, and the rotated rows must be the GEMV's outputs, pairs of rows (hd even)
    if (!as_rope_shape_ok(a.m, heads, hd, rd, pos0, pos) || hd % 2 || (int64_t)heads * hd != a.n_out || !cos_t ||
        !sin_t || room < 0)
        return (int)cudaErrorInvalidValue;
    a.rope = AsDRope{cos_t, sin_t, hd, rd, pos0, pos, inverse ? 1 : 0};
    if (a.W && a.x && vector_rows(a, 1))
        return gemv_launch<TW>(a, 1, 0, 0, st, room);
    a.rope = AsDRope{}; // rows the vector kernel cannot read: the GEMV, then rope.cu
    const int rc = gemv_launch<TW>(a, 1, 0, 0, st, room);
    if (rc || a.m == 0 || a.n_out == 0)
        return rc;
    return as_k_rope((as_bf16_t *)a.y, a.ldy, a.m, heads, hd, rd, pos0, pos, cos_t, sin_t, inverse, st);
}

template <typename TW>
int gemv_norm(GemvArgs a, as_bf16_t *h, const float *norm_w, float eps, as_bf16_t *y_norm, unsigned *ctr,
              cudaStream_t st)
{
    if (!norm_w || !y_norm || !ctr || a.n_out <= 0 || a.n_in <= 0)
        return (int)cudaErrorInvalidValue;
    a.res = h, a.ldres = a.n_out;
    a.norm = {norm_w, y_norm, eps, ctr};
    if (a.W && a.x && vector_rows(a, 1) && a.n_out <= kRmsCached * kRmsThreads)
        return gemv_launch<TW>(a, 1, 0, 0, st);
    a.norm = {}; // rows the vector kernel cannot read (or too long to cache): the GEMV, then rmsnorm.cu
    const int rc = gemv_launch<TW>(a, 1, 0, 0, st);
    if (rc)
        return rc;
    return as_k_rmsnorm(h ? h : (as_bf16_t *)a.y, a.n_out, norm_w, y_norm, a.n_out, 1, a.n_out, eps, st);
}

// An fp8-form weight's GEMV arguments: its codes as W, its block scales, batch b's rows b * stride_rows on.
GemvArgs e4m3_args(const AsFp8Weight *w, const as_bf16_t *x, int64_t ldx, int64_t stride_x, int m, void *y,
                   int64_t ldy, int64_t stride_y, int y_f32)
{
    GemvArgs a{w->w, w->ldw, w->stride_rows * w->ldw, w->n_out, w->n_in, x, ldx, stride_x, m, y, ldy, stride_y,
               y_f32 ? 1 : 0, nullptr, 0, {}, {}, w->ws, w->ldws, w->stride_rows / 32 * w->ldws};
    return a;
}

// e4m3 weights: batch groups start on a 32-row block (their scales' rows), scales powers of two (the
// caller's promise, model/fp8_form.h); single: the fused forms' one batch
bool e4m3_ok(const AsFp8Weight *w, bool single = false)
{
    return w && w->batch >= 1 && (w->batch == 1 || (!single && w->stride_rows % 32 == 0));
}
} // namespace

extern "C" int as_k_gemv_bf16_residual(const as_bf16_t *W, int n_out, int n_in, const as_bf16_t *x, int64_t ldx, int m,
                                       as_bf16_t *y, int64_t ldy, as_bf16_t *h, int64_t ldh, cudaStream_t st)
{
    GemvArgs a{W, n_in, 0, n_out, n_in, x, ldx, 0, m, y, ldy, 0, 0, nullptr, 0, {}, {}, nullptr, 0, 0};
    return gemv_residual<uint16_t>(a, h, ldh, st);
}

extern "C" int as_k_gemv_bf16_rope(const as_bf16_t *W, int n_out, int n_in, const as_bf16_t *x, int64_t ldx, int m,
                                   as_bf16_t *y, int64_t ldy, int heads, int hd, int rd, int pos0, const int32_t *pos,
                                   const float *cos_t, const float *sin_t, int inverse, int room, cudaStream_t st)
{
    GemvArgs a{W, n_in, 0, n_out, n_in, x, ldx, 0, m, y, ldy, 0, 0, nullptr, 0, {}, {}, nullptr, 0, 0};
    return gemv_rope<uint16_t>(a, heads, hd, rd, pos0, pos, cos_t, sin_t, inverse, room, st);
}

extern "C" int as_k_gemv_bf16_norm(const as_bf16_t *W, int n_out, int n_in, const as_bf16_t *x, as_bf16_t *y,
                                   as_bf16_t *h, const float *norm_w, float eps, as_bf16_t *y_norm, unsigned *ctr,
                                   cudaStream_t st)
{
    GemvArgs a{W, n_in, 0, n_out, n_in, x, n_in, 0, 1, y, n_out, 0, 0, nullptr, 0, {}, {}, nullptr, 0, 0};
    return gemv_norm<uint16_t>(a, h, norm_w, eps, y_norm, ctr, st);
}

extern "C" int as_k_gemv_e4m3_cfg(const AsFp8Weight *w, const as_bf16_t *x, int64_t ldx, int64_t stride_x, int m,
                                  void *y, int64_t ldy, int64_t stride_y, int y_f32, int R, int Wn, cudaStream_t st)
{
    if (!e4m3_ok(w))
        return (int)cudaErrorInvalidValue;
    return gemv_launch<uint8_t>(e4m3_args(w, x, ldx, stride_x, m, y, ldy, stride_y, y_f32), w->batch, R, Wn, st);
}

extern "C" int as_k_gemv_e4m3(const AsFp8Weight *w, const as_bf16_t *x, int64_t ldx, int64_t stride_x, int m, void *y,
                              int64_t ldy, int64_t stride_y, int y_f32, cudaStream_t st)
{
    return as_k_gemv_e4m3_cfg(w, x, ldx, stride_x, m, y, ldy, stride_y, y_f32, 0, 0, st);
}

extern "C" int as_k_gemv_e4m3_residual(const AsFp8Weight *w, const as_bf16_t *x, int64_t ldx, int m, as_bf16_t *y,
                                       int64_t ldy, as_bf16_t *h, int64_t ldh, cudaStream_t st)
{
    if (!e4m3_ok(w, true))
        return (int)cudaErrorInvalidValue;
    return gemv_residual<uint8_t>(e4m3_args(w, x, ldx, 0, m, y, ldy, 0, 0), h, ldh, st);
}

extern "C" int as_k_gemv_e4m3_rope(const AsFp8Weight *w, const as_bf16_t *x, int64_t ldx, int m, as_bf16_t *y,
                                   int64_t ldy, int heads, int hd, int rd, int pos0, const int32_t *pos,
                                   const float *cos_t, const float *sin_t, int inverse, int room, cudaStream_t st)
{
    if (!e4m3_ok(w, true))
        return (int)cudaErrorInvalidValue;
    return gemv_rope<uint8_t>(e4m3_args(w, x, ldx, 0, m, y, ldy, 0, 0), heads, hd, rd, pos0, pos, cos_t, sin_t,
                              inverse, room, st);
}

extern "C" int as_k_gemv_e4m3_norm(const AsFp8Weight *w, const as_bf16_t *x, as_bf16_t *y, as_bf16_t *h,
                                   const float *norm_w, float eps, as_bf16_t *y_norm, unsigned *ctr, cudaStream_t st)
{
    if (!e4m3_ok(w, true))
        return (int)cudaErrorInvalidValue;
    return gemv_norm<uint8_t>(e4m3_args(w, x, w->n_in, 0, 1, y, w->n_out, 0, 0), h, norm_w, eps, y_norm, ctr, st);
}

extern "C" int as_k_gemv_f32w(const float *W, int64_t ldw, int n_out, int n_in, const as_bf16_t *x, int64_t ldx, int m,
                              float *y, int64_t ldy, cudaStream_t st)
{
    return as_k_gemv_f32w_cfg(W, ldw, n_out, n_in, x, ldx, m, y, ldy, 0, 0, st);
}
#endif // AS_EMU
