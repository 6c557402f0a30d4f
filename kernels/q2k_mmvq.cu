// Q2_K matrix-vector product for up to 8 token rows (decode), batched (twin: as_vec_dot_q2_K_q8_1
// in model/quants.c, test: tests/gpu_q2k.c, bench: bench/kernels_bench.cu).
//
//   y_b[t][o] = sum over the terms (kb, iqs) of row o of ggml's vec_dot_q2_K_q8_1 term
//               (q2k::term: 16 weights of Q2_K block kb against 4 q8_1 blocks of x_b[t])
//
// W_b = W + b * strideW, row o at W_b + o * ldw (strides in Q2_K blocks); x_b = xq + b * strideX,
// token row t at x_b + t * ldx (in q8_1 blocks); y_b = y + b * strideY, rows ldy apart (elements).
//
// Exactness: bit for bit the twin (model/quants.h), f32 and bf16 alike. The twin is ggml's
// mul_mat_vec_q with one warp of 32 lanes per output row, and so is this kernel (W = 1): lane l
// takes the terms (kb, iqs) = (l / 16 + 2k, l % 16), k = 0, 1, ... in increasing kb, accumulates
// acc = 0; acc = acc + term in that order, and the warp sum is the xor butterfly (offsets 16 .. 1).
// Each term is ggml's integer dot products and separately rounded f32 operations in ggml's order
// (q2k::term). The explicit configurations W = 2, 4, 8 (several warps per row, a benchmark option)
// sum in another order and are exact only up to f32 rounding.
//
// Design (memory bound at m = 1; the exact term costs ~35 instructions per 16 weights per token):
//   * ggml's thread mapping: a term is one 32-bit word of qs (16 weights) of one Q2_K block, so a
//     warp covers 2 blocks (168 bytes) per step: qs words coalesced, the 2 scale words and d | dmin
//     shared by 4 / 16 lanes.
//   * R consecutive rows (1, 2, 4) per warp: the q8_1 data of a term (4 ints and 4 scales per token)
//     is loaded once for the R rows; 8 warps per 256-thread CTA; grid.y = batch.
//   * U terms per lane per iteration (4 at m = 1, 2 at m <= 4, 1 at m = 8): their loads are all
//     issued before the first is used, so ~U x (4 R + 8 m) loads are in flight per thread; the sum
//     stays in increasing kb. A lane's terms share iqs, so its loads walk pointers (3 per row, 2
//     per token) by a fixed stride, with immediate offsets inside a block.
//   * weights through the read-only path (__ldg, L1 allocating: the loads of a block share sectors),
//     x (a few KiB per token) stays in L1.
//   * per term and row the scales and quants are premultiplied once (q2k::term_weights); the
//     integer -> float conversions are exact bias tricks (no I2F).
//   * reduction: warp xor-shuffle; W > 1 then adds the group's warps in warp order (shared memory).
// R from pick_config() (enough warps: ~32 per SM); bench/kernels_bench.cu can force R and W
// (as_k_q2k_mmvq_cfg).
#include "kernels/kernels.h"
#include "kernels/gemv_epilogue.cuh"
#include "kernels/q2k.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// A lane's terms all have the same iqs (L is a multiple of 16) and blocks kb0, kb0 + kstep, ...: its
// loads walk pointers that advance by one term's stride, every offset inside a block an immediate.

// The q8_1 data of term (kb, iqs) for M token rows: u[t][i] = int iqs % 8 of q8_1 block
// kb * 8 + 4 * (iqs / 8) + i, d8[t][i] its scale (ggml's vec_dot_q2_K_q8_1 operands). Pointers (in
// words): u at that block's int iqs % 8, d at the block's first word (d | s << 16); block i is 9 words on.
template <int M> struct XPtr {
    const uint32_t *u[M], *d[M];
    __device__ __forceinline__ void advance(int64_t words)
    {
#pragma unroll
        for (int t = 0; t < M; t++)
            u[t] += words, d[t] += words;
    }
};
template <int M> struct TermX {
    int u[M][4];
    float d8[M][4];
    __device__ __forceinline__ void load(const XPtr<M> &p)
    {
#pragma unroll
        for (int t = 0; t < M; t++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                u[t][i] = (int)q2k::ld(p.u[t] + 9 * i);
                d8[t][i] = q2k::h2f((uint16_t)(q2k::ld(p.d[t] + 9 * i) & 0xffffu));
            }
    }
};

// The Q2_K data of term (kb, iqs) for R rows: the qs word (word 4 + iqs of the block), the two scale
// words holding its four scales (words 2 (iqs / 8), + 1), and d | dmin << 16 (word 20).
template <int R> struct WPtr {
    const uint32_t *q[R], *s[R], *d[R];
    __device__ __forceinline__ void advance(int64_t words)
    {
#pragma unroll
        for (int r = 0; r < R; r++)
            q[r] += words, s[r] += words, d[r] += words;
    }
};
template <int R> struct TermW {
    uint32_t v[R], s_lo[R], s_hi[R], dm[R];
    __device__ __forceinline__ void load(const WPtr<R> &p)
    {
#pragma unroll
        for (int r = 0; r < R; r++) {
            v[r] = q2k::ld(p.q[r]);
            s_lo[r] = q2k::ld(p.s[r]);
            s_hi[r] = q2k::ld(p.s[r] + 1);
            dm[r] = q2k::ld(p.d[r]);
        }
    }
};

template <int R, int M>
__device__ __forceinline__ void term_accumulate(const TermW<R> &w, const TermX<M> &x, int iqs, float (&acc)[R][M])
{
#pragma unroll
    for (int r = 0; r < R; r++) {
        int vs[4], ms[4];
        q2k::term_weights(w.v[r], q2k::term_scales(w.s_lo[r], w.s_hi[r], iqs), vs, ms);
        const float dx = q2k::h2f((uint16_t)(w.dm[r] & 0xffffu)), dy = q2k::h2f((uint16_t)(w.dm[r] >> 16));
#pragma unroll
        for (int t = 0; t < M; t++)
            acc[r][t] += q2k::term(vs, ms, x.u[t], x.d8[t], dx, dy);
    }
}

template <int R, int M>
__global__ void __launch_bounds__(kThreads, 1) q2k_mmvq_kernel(q2k::Args a, int w_warps)
{
    as_d_pdl_wait();
    constexpr int kUnroll = M == 1 ? 4 : M <= 4 ? 2 : 1; // terms per lane per iteration

    __shared__ float red[kWarps][R * M];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int groups_per_block = kWarps / w_warps;
    const int group = warp / w_warps, wig = warp % w_warps;
    const int li = wig * 32 + lane, L = 32 * w_warps;
    const int64_t b = blockIdx.y;
    const int row0 = ((int)blockIdx.x * groups_per_block + group) * R;

    const int iqs = li & 15, kb0 = li >> 4, kstep = L >> 4, nb = a.n_in / AS_QK_K;
    constexpr int kWWords = sizeof(AsBlockQ2K) / 4; // 21
    WPtr<R> wp;
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int o = row0 + r < a.n_out ? row0 + r : a.n_out - 1; // clamped: loaded, never stored
        const uint32_t *blk = (const uint32_t *)(a.W + b * a.strideW + (int64_t)o * a.ldw + kb0);
        wp.q[r] = blk + 4 + iqs;
        wp.s[r] = blk + 2 * (iqs >> 3);
        wp.d[r] = blk + 20;
    }
    XPtr<M> xp;
#pragma unroll
    for (int t = 0; t < M; t++) { // token rows t >= m (M rounds m up) read row 0: computed, never stored
        const AsBlockQ8_1 *x0 = a.x + b * a.strideX + (int64_t)(t < a.m ? t : 0) * a.ldx + (int64_t)kb0 * 8 +
                                (iqs >> 3) * 4;
        xp.d[t] = (const uint32_t *)x0;
        xp.u[t] = (const uint32_t *)x0 + 1 + (iqs & 7);
    }
    const int64_t wstep = (int64_t)kstep * kWWords, xstep = (int64_t)kstep * 8 * (sizeof(AsBlockQ8_1) / 4);

    float acc[R][M];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int t = 0; t < M; t++)
            acc[r][t] = 0.0f;

    int kb = kb0;
    for (; kb + (kUnroll - 1) * kstep < nb; kb += kUnroll * kstep) {
        TermW<R> w[kUnroll];
        TermX<M> x[kUnroll];
#pragma unroll
        for (int k = 0; k < kUnroll; k++) { // every load of the kUnroll terms first
            w[k].load(wp);
            x[k].load(xp);
            wp.advance(wstep);
            xp.advance(xstep);
        }
#pragma unroll
        for (int k = 0; k < kUnroll; k++) // then the sums, in increasing kb
            term_accumulate<R, M>(w[k], x[k], iqs, acc);
    }
    for (; kb < nb; kb += kstep) { // fewer than kUnroll terms left for this lane
        TermW<R> w;
        TermX<M> x;
        w.load(wp);
        x.load(xp);
        wp.advance(wstep);
        xp.advance(xstep);
        term_accumulate<R, M>(w, x, iqs, acc);
    }

    as_d_group_sum_store<R, M>(acc, red, w_warps, row0, b, a);
}

#ifndef AS_EMU
// R rows per warp, one warp per row group (W = 1, the twin's order): R = 4 (x loaded once for 4
// rows) unless that leaves fewer than ~32 warps per SM, then 2, then 1.
void pick_config(int n_out, int batch, int *R, int *W)
{
    const int64_t target = (int64_t)as_sm_count() * 32;
    int r = 4;
    while (r > 1 && (int64_t)batch * ((n_out + r - 1) / r) < target)
        r /= 2;
    *R = r;
    *W = 1;
}

template <int R>
int launch_m(const q2k::Args &a, int batch, int w_warps, cudaStream_t st)
{
    const int groups_per_block = kWarps / w_warps;
    const int64_t groups = (a.n_out + R - 1) / R;
    const dim3 grid((unsigned)((groups + groups_per_block - 1) / groups_per_block), (unsigned)batch);
    if (a.m <= 1)
        as_launch(q2k_mmvq_kernel<R, 1>, grid, kThreads, 0, st, a, w_warps);
    else if (a.m <= 2)
        as_launch(q2k_mmvq_kernel<R, 2>, grid, kThreads, 0, st, a, w_warps);
    else if (a.m <= 4)
        as_launch(q2k_mmvq_kernel<R, 4>, grid, kThreads, 0, st, a, w_warps);
    else
        as_launch(q2k_mmvq_kernel<R, 8>, grid, kThreads, 0, st, a, w_warps);
    return AS_LAUNCH_RESULT();
}

#endif // AS_EMU

} // namespace

#ifndef AS_EMU
// Explicit configuration (R in {1, 2, 4}, W in {1, 2, 4, 8}; 0 = automatic: W = 1, exact), for the
// benchmark and the test of every configuration; not part of kernels.h.
extern "C" int as_k_q2k_mmvq_cfg(const void *W, int64_t ldw, int64_t strideW, int n_out, int n_in, const void *xq,
                                 int64_t ldx, int64_t strideX, int m, void *y, int64_t ldy, int64_t strideY, int y_f32,
                                 int batch, int R, int Wn, cudaStream_t st)
{
    if (m > 8)
        return (int)cudaErrorInvalidValue;
    bool empty;
    const int bad = q2k::check_args(W, ldw, strideW, n_out, n_in, xq, ldx, strideX, m, y, ldy, strideY, y_f32, batch,
                                    &empty);
    if (bad || empty)
        return bad;
    if ((R != 0 && R != 1 && R != 2 && R != 4) || (Wn != 0 && Wn != 1 && Wn != 2 && Wn != 4 && Wn != 8))
        return (int)cudaErrorInvalidValue;
    int r = R, w = Wn;
    if (!r || !w) {
        int pr, pw;
        pick_config(n_out, batch, &pr, &pw);
        r = r ? r : pr;
        w = w ? w : pw;
    }
    const q2k::Args a{(const AsBlockQ2K *)W, ldw, strideW, n_out, n_in, (const AsBlockQ8_1 *)xq, ldx, strideX, m, y,
                     ldy, strideY, y_f32 ? 1 : 0, 0};
    switch (r) {
    case 1: return launch_m<1>(a, batch, w, st);
    case 2: return launch_m<2>(a, batch, w, st);
    default: return launch_m<4>(a, batch, w, st);
    }
}

extern "C" void as_k_q2k_mmvq_pick_config(int n_out, int n_in, int batch, int *R, int *W)
{
    (void)n_in;
    pick_config(n_out, batch, R, W);
}

extern "C" int as_k_q2k_mmvq(const void *W, int64_t ldw, int64_t strideW, int n_out, int n_in, const void *xq,
                             int64_t ldx, int64_t strideX, int m, void *y, int64_t ldy, int64_t strideY, int y_f32,
                             int batch, cudaStream_t st)
{
    return as_k_q2k_mmvq_cfg(W, ldw, strideW, n_out, n_in, xq, ldx, strideX, m, y, ldy, strideY, y_f32, batch, 0, 0,
                             st);
}
#endif // AS_EMU
