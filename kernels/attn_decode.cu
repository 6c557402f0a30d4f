// Sparse attention with the sink for ONE query (decode, and a 1-token prefill): SPEC 3 step 7, kernel.py's
// blockwise softmax as kernels/sparse_attn.cu's header states it; twin as_sparse_attention in
// ref/attention.c; tests tests/gpu_sparse_attn.c (auto path at s = 1, against the twin) and
// tests/gpu_decode_kernels.c (device parameters against by value, bit for bit; by value against the twin).
//
// Why a kernel apart from sparse_attn.cu's tensor-core one: at s = 1 the work is tiny (64 heads x
// 640 rows x 512) and the time is latency. The tensor-core kernel gives each block all 64 heads, so
// each of its blocks loads the whole Q (64 KB) and writes a 128 KB partial. Here a block takes H heads
// and one split of kSplit = 64 entries, on tensor cores for QK and PV.
//
// A split is one of kernel.py's blocks of 64 entries (entries 64 j .. 64 j + 63): inside it the softmax
// is kernel.py's (m = max(-1e30, max z), p = exp(z - m), l = sum of the f32 p, o = sum bf16(p) row), so
// nothing finer than a block can be split off (bf16(p) needs the block's max). The combine then folds
// the splits as flash-decoding does, each split's bf16(p) rounded against its own max rather than the
// running max kernel.py would have reached there (the accepted deviation, docs/ENGINE.md).
// Heads a block: 8 where nh allows (flash: 10 splits x 8 head groups = 80 blocks of 8 warps): each split's
// rows are gathered once for 8 heads, so the rows gathered per step stay those of 32-entry splits with
// 8 heads; 4 heads a block would keep 160 blocks but gather every row twice as often (halving the heads
// a block, with its doubled gathers, measured slower before: bench/RESULTS.md). Else 4.
//   block (split j, head group): the split's entries idx[64 j ..) are resolved (-1 and rows beyond
//   na + nb skipped) and their rows copied into shared memory with cp.async (zeros for a skipped
//   entry: its p is 0, and 0 x NaN bits would not be); the queries after them;
//   QK (split_mma_kernel): S^T[r][h] = rows[r] . q[h] as mma.sync m16n8k16 (bf16 in, f32 accumulate):
//     M = the 64 rows (4 tiles), N = heads (the MMA's 8 columns: H heads, padded when H = 4), K =
//     channels, each warp 1/H of them; the warps' partials added in warp order through shared memory.
//   softmax: warp w = head hb + w, lane l holds entries l and l + 32 (above);
//   PV: O^T[d][h] = sum_r rows[r][d] bf16(p[h][r]): M = channels (each warp 1/H), N = heads, K = the
//     64 rows, read transposed by ldmatrix.trans;
//   written to the workspace as [split][h][HD] and [split][h][2] (m, l).
// The rows' pitch is a row and 16 bytes (CPR + 1 chunks), so ldmatrix's 8 row addresses fall in 8 bank
// groups.
// The combine folds the live splits and the sink for each head: M = max_j m_j (the sink left out),
// den = sum_j l_j exp(m_j - M) + exp(sink - M), o = bf16(sum_j exp(m_j - M) o_j / den) (no selected
// row: o = 0). Splits are fixed blocks of kSplit entries, so a launch sized for topk_max that reads the
// live width from device memory (the decode graph) computes exactly what a launch at the live width
// computes.
#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/mma.cuh"
#include "kernels/rope_pair.cuh"
#include "kernels/sparse_attn_args.cuh"

namespace attn1 {

constexpr int kSplit = asattn::kBlock; // selection entries per split (block): one softmax block
constexpr int kHeads = 4;              // heads per block where nh is not a multiple of 8
constexpr unsigned kFull = 0xffffffffu;
constexpr int kMaxSplits = 128; // selections up to 8192 entries
using asattn::kMaxInit;

struct Args {
    const uint16_t *q, *rows_a, *rows_b;
    int na, nb;
    const int32_t *nb_d;
    const int32_t *idx;
    int topk;
    const int32_t *topk_d;
    const float *sink;
    uint16_t *o;
    int nh;
    float scale;
    float *ws_o;  // [nsplit][nh][HD]
    float *ws_ml; // [nsplit][nh][2]
    AsOBack ob; // ob.o_back non-null: the combine also writes o rotated back
    // the split stages its entries and rows before its PDL wait (only q after it): the caller vouches that
    // the kernel launched just before on the stream writes none of idx, rows_a, rows_b, topk_d, nb_d
    int early_rows;
};

// A split's staging (NT threads). The loads are issued together, not one after another (in a chain the
// round trips to memory were most of the split's time): load_entries issues the indices of the entries
// this thread stages (and of entry tid, for valid[]), the kernel its queries and the live width and row
// count, then stage_rows copies the rows those entries name (cp.async, zeros for a skipped entry; the
// kernel waits for them before its barrier): a thread copies chunk tid % CPR of rows tid / CPR + RPP i.
template <int HD, int NT> struct StagePlan {
    static constexpr int CPR = HD / 8;         // 16-byte chunks per row
    static constexpr int RPP = NT / CPR;       // rows staged per pass of the block
    static constexpr int kPass = kSplit / RPP; // passes
    static_assert(NT % CPR == 0 && kSplit % RPP == 0 && NT >= kSplit, "a pass stages whole rows");
};

template <int HD, int NT>
__device__ __forceinline__ void load_entries(const Args &a, int e0, int tid, int (&ent)[StagePlan<HD, NT>::kPass],
                                             int &vi)
{
    using P = StagePlan<HD, NT>;
    for (int i = 0; i < P::kPass; i++) {
        const int e = e0 + tid / P::CPR + P::RPP * i;
        ent[i] = e < a.topk ? __ldg(a.idx + e) : -1;
    }
    const int ev = e0 + tid;
    vi = tid < kSplit && ev < a.topk ? __ldg(a.idx + ev) : -1;
}

template <int HD, int NT, int PITCH>
__device__ __forceinline__ void stage_rows(const Args &a, int e0, int tid, int topk, int nb,
                                           const int (&ent)[StagePlan<HD, NT>::kPass], int vi, uint4 (*rows)[PITCH],
                                           int *valid)
{
    using P = StagePlan<HD, NT>;
    const int k = tid % P::CPR;
    for (int i = 0; i < P::kPass; i++) {
        const int r = tid / P::CPR + P::RPP * i, e = e0 + r;
        const int id = e < topk ? ent[i] : -1;
        const bool ok = id >= 0 && id < a.na + nb;
        // a skipped entry reads nothing (zero-fill); its source only has to be a valid address
        const uint16_t *src = !ok ? a.q : id < a.na ? a.rows_a + (size_t)id * HD : a.rows_b + (size_t)(id - a.na) * HD;
        asmma::cp_async16(asmma::smem_u32(&rows[r][k]), (const uint4 *)src + (ok ? k : 0), ok ? 16 : 0);
    }
    asmma::cp_async_commit();
    const int ev = e0 + tid;
    if (tid < kSplit)
        valid[tid] = ev < topk && vi >= 0 && vi < a.na + nb ? vi : -1;
}

// One head's softmax over a split (kernel.py's block), lane l holding the dot products of entries l and
// l + 32 (ok: the entry is selected): z = dot * scale (-inf when skipped), m = max(-1e30, max z),
// p = exp(z - m), l = sum of the f32 p over the xor tree; pb = bf16(p), the weights of PV.
__device__ __forceinline__ void split_softmax(const float (&dot)[2], const bool (&ok)[2], float scale, float &m,
                                              float &l, float (&pb)[2])
{
    float z[2], p[2];
#pragma unroll
    for (int i = 0; i < 2; i++)
        z[i] = ok[i] ? dot[i] * scale : -INFINITY;
    m = fmaxf(kMaxInit, fmaxf(z[0], z[1])); // max is exact: any order gives the entry-order maximum
    for (int off = 16; off > 0; off >>= 1)
        m = fmaxf(m, __shfl_xor_sync(kFull, m, off));
#pragma unroll
    for (int i = 0; i < 2; i++) {
        p[i] = ok[i] ? as_d_expf(z[i] - m) : 0.0f;
        pb[i] = as_d_bf16(p[i]);
    }
    l = p[0] + p[1];
    for (int off = 16; off > 0; off >>= 1)
        l += __shfl_xor_sync(kFull, l, off);
}

// The split on tensor cores: with H heads a block, a warp does 1/H of each product for all H heads (the
// header above). H heads a block, a warp each for the softmax.
template <int HD, int H> struct MmaSmem { // split_mma_kernel's shared memory (dynamic: 71-85 KB at HD 512)
    uint4 rows[kSplit][HD / 8 + 1];
    union {
        uint4 qs[H][HD / 8];        // the block's queries, until QK is done
        float sp[H][kSplit][H + 1]; // then QK's partials [warp][row][head] (+1: bank spread)
    } u;
    uint32_t pb[H][kSplit / 2]; // bf16(p) pairs [head][row pair]
    int valid[kSplit];
};

template <int HD, int H = kHeads>
__global__ void __launch_bounds__(H * 32) split_mma_kernel(Args a)
{
    if (!a.early_rows)
        as_d_pdl_wait();
    constexpr int kThreads = H * 32;
    constexpr int CPR = HD / 8;            // 16-byte chunks per row
    constexpr int QPT = H * CPR / kThreads; // query chunks a thread stages
    constexpr int KSW = HD / 16 / H;       // QK k-steps a warp, PV m-tiles a warp (16 channels each)
    constexpr int MT = kSplit / 16;        // QK m-tiles, PV k-steps (16 rows each)
    static_assert((H == 4 || H == 8) && QPT * kThreads == H * CPR && KSW * H * 16 == HD, "the tiling");
    AS_DYNAMIC_SMEM(attn1_smem);
    MmaSmem<HD, H> &sm = *reinterpret_cast<MmaSmem<HD, H> *>(attn1_smem);
    auto &rows = sm.rows;
    auto &qs = sm.u.qs;
    auto &sp = sm.u.sp;
    auto &pb = sm.pb;
    auto &valid = sm.valid;
    const int split = blockIdx.x, e0 = split * kSplit, hb = blockIdx.y * H;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, c = lane & 3;
    // the loads issued together (StagePlan): the entries, the block's queries, the live sizes, the rows;
    // with early_rows all but the queries before the PDL wait (they stream in while the kernel that
    // writes q finishes), the queries after it
    int ent[StagePlan<HD, kThreads>::kPass], vi;
    load_entries<HD, kThreads>(a, e0, tid, ent, vi);
    uint4 qv[QPT];
    auto load_q = [&]() {
        for (int i = 0; i < QPT; i++) {
            const int j = tid + kThreads * i;
            qv[i] = __ldg((const uint4 *)(a.q + (size_t)(hb + j / CPR) * HD) + j % CPR);
        }
    };
    if (!a.early_rows)
        load_q();
    const int topk = a.topk_d ? min(*a.topk_d, a.topk) : a.topk;
    const int nb = a.nb_d ? min(*a.nb_d, a.nb) : a.nb;
    if (e0 >= topk)
        return; // past the live selection: the combine does not read it
    stage_rows<HD, kThreads>(a, e0, tid, topk, nb, ent, vi, rows, valid);
    if (a.early_rows) {
        as_d_pdl_wait();
        load_q();
    }
    for (int i = 0; i < QPT; i++) {
        const int j = tid + kThreads * i;
        qs[j / CPR][j % CPR] = qv[i];
    }
    asmma::cp_async_wait<0>();
    __syncthreads();

    // QK, warp w: channels [16 KSW w, 16 KSW (w + 1)) of every row and head
    const uint32_t *q32 = (const uint32_t *)&qs[0][0]; // [head][HD / 2] bf16 pairs
    float s[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
        s[mt][0] = s[mt][1] = s[mt][2] = s[mt][3] = 0.0f;
#pragma unroll
    for (int t = 0; t < KSW; t++) {
        const int ks = warp * KSW + t;
        const uint32_t b0 = g < H ? q32[g * (HD / 2) + ks * 8 + c] : 0u;
        const uint32_t b1 = g < H ? q32[g * (HD / 2) + ks * 8 + c + 4] : 0u;
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            uint32_t af[4];
            asmma::ldmatrix_x4(af[0], af[1], af[2], af[3], asmma::smem_u32(&rows[16 * mt + (lane & 15)][2 * ks + (lane >> 4)]));
            asmma::mma_bf16(s[mt], af, b0, b1);
        }
    }
    __syncthreads(); // every warp done with qs: sp takes its place
    if (2 * c < H)
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            sp[warp][16 * mt + g][2 * c] = s[mt][0];
            sp[warp][16 * mt + g][2 * c + 1] = s[mt][1];
            sp[warp][16 * mt + g + 8][2 * c] = s[mt][2];
            sp[warp][16 * mt + g + 8][2 * c + 1] = s[mt][3];
        }
    __syncthreads();
    // softmax of head hb + warp, lane l: entries l and l + 32
    const int h = hb + warp;
    float dot[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        dot[i] = sp[0][lane + 32 * i][warp];
#pragma unroll
        for (int w = 1; w < H; w++) // in warp order
            dot[i] += sp[w][lane + 32 * i][warp];
    }
    float m, l, pw[2];
    const bool ok[2] = {valid[lane] >= 0, valid[lane + 32] >= 0};
    split_softmax(dot, ok, a.scale, m, l, pw);
    // bf16(p) pairs for PV's B fragments: even lanes hold entries (l, l + 1) and (l + 32, l + 33)
    const float n0 = __shfl_xor_sync(kFull, pw[0], 1), n1 = __shfl_xor_sync(kFull, pw[1], 1);
    if (!(lane & 1)) {
        pb[warp][lane >> 1] = asmma::pack_bf16x2(pw[0], n0);
        pb[warp][16 + (lane >> 1)] = asmma::pack_bf16x2(pw[1], n1);
    }
    __syncthreads();

    // PV, warp w: channels [16 KSW w, 16 KSW (w + 1)) of every head
    float o[KSW][4];
#pragma unroll
    for (int t = 0; t < KSW; t++) {
        o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.0f;
        const int mt = warp * KSW + t;
#pragma unroll
        for (int kk = 0; kk < MT; kk++) {
            uint32_t af[4];
            const int r = 16 * kk + (lane & 7) + ((lane >> 4) << 3);
            asmma::ldmatrix_x4_trans(af[0], af[1], af[2], af[3], asmma::smem_u32(&rows[r][2 * mt + ((lane >> 3) & 1)]));
            const uint32_t b0 = g < H ? pb[g][8 * kk + c] : 0u;
            const uint32_t b1 = g < H ? pb[g][8 * kk + c + 4] : 0u;
            asmma::mma_bf16(o[t], af, b0, b1);
        }
    }
    if (2 * c < H) { // lane (g, c): heads 2c, 2c + 1 at channels 16 mt + g and + 8
        float *w0 = a.ws_o + ((size_t)split * a.nh + hb + 2 * c) * HD, *w1 = w0 + HD;
#pragma unroll
        for (int t = 0; t < KSW; t++) {
            const int d = 16 * (warp * KSW + t) + g;
            w0[d] = o[t][0];
            w1[d] = o[t][1];
            w0[d + 8] = o[t][2];
            w1[d + 8] = o[t][3];
        }
    }
    if (lane == 0) {
        a.ws_ml[((size_t)split * a.nh + h) * 2] = m;
        a.ws_ml[((size_t)split * a.nh + h) * 2 + 1] = l;
    }
}

// One block per head, HD / 4 threads of 4 channels: the live splits folded in split order. The
// splits' (m, l) are read once into shared memory, their factors f_j = exp(m_j - M) computed once each;
// every thread then takes M and the denominator from them in split order (the same bits in each
// thread, no barrier for them). A thread's partials are loaded kAhead splits at a time before their
// FMAs, the first group before any barrier: loads in flight together, the FMAs in split order.
// kAhead = 16 holds a selection of 1024 entries (flash: 640, 10 splits) in one group.
// A split without a selected entry has m_j = -1e30, l_j = 0, o_j = 0: f_j is 0, or 1 where no split has
// one (M = -1e30; then den = exp(sink + 1e30) = inf, or 0 with a sink of -inf: o = 0 either way).
template <int HD>
__global__ void __launch_bounds__(HD / 4) combine_kernel(Args a)
{
    constexpr int kAhead = 16;
    as_d_pdl_wait();
    __shared__ float fsm[3 * kMaxSplits]; // m_j, then l_j, then the factors
    const int topk = a.topk_d ? min(*a.topk_d, a.topk) : a.topk;
    const int nsplit = (topk + kSplit - 1) / kSplit;
    const int h = blockIdx.x, c = threadIdx.x * 4;
    const float *part = nsplit > 0 ? a.ws_o + (size_t)h * HD + c : nullptr; // split j's: part + j * nh * HD
    const size_t stride = (size_t)a.nh * HD;
    float4 v[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; u++)
        if (u < nsplit)
            v[u] = *(const float4 *)(part + u * stride);
    const float sink = a.sink[h];
    float *mj = fsm, *lj = fsm + nsplit, *fj = fsm + 2 * nsplit;
    for (int j = threadIdx.x; j < nsplit; j += blockDim.x) {
        mj[j] = a.ws_ml[((size_t)j * a.nh + h) * 2];
        lj[j] = a.ws_ml[((size_t)j * a.nh + h) * 2 + 1];
    }
    __syncthreads();
    float M = kMaxInit;
    for (int j = 0; j < nsplit; j++)
        M = fmaxf(M, mj[j]);
    for (int j = threadIdx.x; j < nsplit; j += blockDim.x)
        fj[j] = as_d_expf(mj[j] - M);
    __syncthreads();
    float l = 0.0f;
    for (int j = 0; j < nsplit; j++)
        if (fj[j] != 0.0f)
            l += lj[j] * fj[j];
    const float inv = asattn::attn_inv(asattn::attn_den(l, M, sink));
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int j0 = 0; j0 < nsplit; j0 += kAhead) {
        if (j0 > 0)
#pragma unroll
            for (int u = 0; u < kAhead; u++)
                if (j0 + u < nsplit)
                    v[u] = *(const float4 *)(part + (j0 + u) * stride);
#pragma unroll
        for (int u = 0; u < kAhead; u++) {
            const int j = j0 + u;
            if (j >= nsplit)
                break;
            const float f = fj[j];
            if (f == 0.0f)
                continue;
            acc[0] = fmaf(v[u].x, f, acc[0]);
            acc[1] = fmaf(v[u].y, f, acc[1]);
            acc[2] = fmaf(v[u].z, f, acc[2]);
            acc[3] = fmaf(v[u].w, f, acc[3]);
        }
    }
    uint16_t y[4];
    uint16_t *dst = a.o + (size_t)h * HD + c;
    for (int t = 0; t < 4; t++) {
        y[t] = as_d_f32_to_bf16(acc[t] * inv);
        dst[t] = y[t];
    }
    if (a.ob.o_back) {
        // row_pipe.cu's inverse RoPE on the last rd channels, pair (base + 2k, base + 2k + 1) with k's
        // cos and the negated sin, each step rounded; a pair never straddles a thread's 4 channels
        // (c and base are even)
        const AsOBack &b = a.ob;
        const int pos = b.pos_d ? *b.pos_d : b.pos0, base = HD - b.rd, half = b.rd / 2;
        for (int t = 0; t < 4; t += 2) {
            const int i = c + t;
            if (b.rd > 0 && pos >= 0 && i >= base) {
                const int k = (i - base) / 2;
                as_d_rope_pair(y[t], y[t + 1], b.cos_t[(int64_t)pos * half + k], -b.sin_t[(int64_t)pos * half + k]);
            }
        }
        uint16_t *ob = b.o_back + (size_t)h * HD + c;
        for (int t = 0; t < 4; t++)
            ob[t] = y[t];
    }
}

} // namespace attn1

#ifndef AS_EMU // host side (tools/emu runs the kernels above on the CPU)

extern "C" int as_k_attn_decode_applies(int nh, int hd, int topk_max)
{
    return (hd == 256 || hd == 512) && nh % attn1::kHeads == 0 && nh > 0 && topk_max >= 0 &&
           topk_max <= attn1::kSplit * attn1::kMaxSplits;
}

extern "C" size_t as_k_attn_decode_ws_bytes(int nh, int hd, int topk_max)
{
    const size_t nsplit = (size_t)(topk_max + attn1::kSplit - 1) / attn1::kSplit;
    return sizeof(float) * nsplit * (size_t)nh * (size_t)(hd + 2);
}

namespace {
// The split kernels' dynamic shared memory (above the default 48 KB): raised once per device and kernel.
template <int HD> int allow_smem()
{
    int rc = as_allow_dynamic_smem<attn1::split_mma_kernel<HD, 8>>((int)sizeof(attn1::MmaSmem<HD, 8>));
    if (!rc)
        rc = as_allow_dynamic_smem<attn1::split_mma_kernel<HD, attn1::kHeads>>(
            (int)sizeof(attn1::MmaSmem<HD, attn1::kHeads>));
    return rc;
}

// split_mma_kernel with H heads a block: H warps, its shared memory sized for HD
template <int HD, int H> void launch_split_mma(dim3 grid, cudaStream_t st, const attn1::Args &a)
{
    as_launch(attn1::split_mma_kernel<HD, H>, grid, H * 32, sizeof(attn1::MmaSmem<HD, H>), st, a);
}

template <int HD> void launch_split(int H, dim3 grid, cudaStream_t st, const attn1::Args &a)
{
    if (H == 8)
        launch_split_mma<HD, 8>(grid, st, a);
    else
        launch_split_mma<HD, attn1::kHeads>(grid, st, a);
}
} // namespace

extern "C" int as_k_attn_decode_prepare(int hd)
{
    if (hd != 256 && hd != 512)
        return (int)cudaErrorInvalidValue;
    return hd == 512 ? allow_smem<512>() : allow_smem<256>();
}

// ws: at least as_k_attn_decode_ws_bytes(nh, hd, topk) bytes, or null: allocated on the stream here
// (stream-ordered, freed after the combine; never with topk_d: a graph must bring its own).
extern "C" int as_k_attn_decode(const as_bf16_t *q, const as_bf16_t *rows_a, int na, const as_bf16_t *rows_b, int nb,
                                const int32_t *nb_d, const int32_t *idx, int topk, const int32_t *topk_d,
                                const float *sink, as_bf16_t *o, int nh, int hd, float scale, void *ws,
                                size_t ws_bytes, const AsOBack *ob, int early_rows, cudaStream_t st)
{
    if (ob && !as_oback_ok(ob, hd))
        return (int)cudaErrorInvalidValue;
    if (!as_k_attn_decode_applies(nh, hd, topk) || na < 0 || nb < 0 || !q || !o || !sink ||
        (topk > 0 && !idx) || (na > 0 && !rows_a) || (nb > 0 && !rows_b) || ((uintptr_t)q & 15) ||
        (na > 0 && ((uintptr_t)rows_a & 15)) || (nb > 0 && ((uintptr_t)rows_b & 15)))
        return (int)cudaErrorInvalidValue;
    int rc = as_k_attn_decode_prepare(hd); // at once after the first call (the decode plan's, before a capture)
    if (rc)
        return rc;
    const size_t need = as_k_attn_decode_ws_bytes(nh, hd, topk);
    void *own = nullptr;
    if (!ws || ws_bytes < need) {
        if (topk_d || ws)
            return (int)cudaErrorInvalidValue;
        if (need && cudaMallocAsync(&own, need, st) != cudaSuccess)
            return (int)cudaErrorMemoryAllocation;
        ws = own;
    }
    const int nsplit = (topk + attn1::kSplit - 1) / attn1::kSplit;
    float *ws_o = nsplit > 0 ? (float *)ws : nullptr;
    attn1::Args a{q, rows_a, rows_b, na, nb, nb_d, idx, topk, topk_d, sink, o, nh, scale, ws_o,
                  ws_o ? ws_o + (size_t)nsplit * nh * hd : nullptr, ob ? *ob : AsOBack{}, 0};
    if (nsplit > 0) {
        const int H = nh % 8 == 0 ? 8 : attn1::kHeads;
        a.early_rows = early_rows;
        dim3 grid((unsigned)nsplit, (unsigned)(nh / H));
        if (hd == 512)
            launch_split<512>(H, grid, st, a);
        else
            launch_split<256>(H, grid, st, a);
        rc = AS_LAUNCH_RESULT();
    }
    if (!rc) {
        if (hd == 512)
            as_launch(attn1::combine_kernel<512>, nh, 512 / 4, 0, st, a);
        else
            as_launch(attn1::combine_kernel<256>, nh, 256 / 4, 0, st, a);
        rc = AS_LAUNCH_RESULT();
    }
    if (own) {
        const cudaError_t fe = cudaFreeAsync(own, st);
        if (!rc && fe != cudaSuccess)
            rc = (int)fe;
    }
    return rc;
}
#endif // AS_EMU
