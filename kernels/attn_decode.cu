// Sparse attention with the sink for ONE query (decode, and a 1-token prefill): SPEC 3 step 7, twin
// as_sparse_attention in ref/attention.c, tests tests/gpu_sparse_attn.c (auto path at s = 1) and
// tests/gpu_decode_kernels.c (device parameters against by value, bit for bit).
//
// Why a kernel apart from sparse_attn.cu's tensor-core one: at s = 1 the work is tiny (64 heads x
// 640 rows x 512) and the time is latency. The tensor-core kernel gives each block all 64 heads, so
// a 640-entry selection makes 20 blocks that each load the whole Q (64 KB) and write a 128 KB partial:
// ~36 us on the H200. Here a block takes 4 heads (one per warp) and one split of kSplit entries, so
// the same selection makes 20 x 16 = 320 blocks, each reading 4 KB of Q and its split's rows (32 KB,
// shared by the 16 head blocks through L2), on CUDA cores in f32. (8 heads a block made 160 blocks:
// 28 SMs ran two, and the kernel is bound by instruction issue on those.)
//   block (split j, head group g): the split's entries idx[j*kSplit ..) are resolved (-1 and rows
//   beyond na + nb skipped), their rows staged in shared memory (16-byte loads, all threads);
//   warp w = head h = kHeads g + w, lane l owns the 16-byte chunks l, l + 32, ... of the head (HD / 256
//   chunks): z_e = (q_h . row_e) * scale (lane partial sums, added over the xor tree of lanes: a
//   reduce-scatter leaves z_e in lane e), the split's m = max z, p_e = exp(z_e - m), l = sum p_e,
//   o = sum p_e row_e (f32, entry order);
//   written to the workspace as [split][h][HD] and [split][h][2]. That is split_kernel (CUDA cores,
//   ATTNSCOPE_ATTN_SPLIT=fma); split_mma_kernel, the default, computes the same split's QK and PV on
//   tensor cores, the block's warps sharing both products over its heads (the weights as two bf16
//   terms for PV), with 8 heads a block where the head count allows (20 x 8 blocks at flash: the
//   FMA form's issue limit that made 8 heads slow there is gone), else 4.
// The combine folds the live splits and the sink for each head: M = max(sink, max_j m_j),
// den = exp(sink - M) + sum_j l_j exp(m_j - M), o = bf16(sum_j exp(m_j - M) o_j / den) (no selected
// row and no finite sink: o = 0). Splits are fixed blocks of kSplit entries, so a launch sized for
// topk_max that reads the live width from device memory (the decode graph) computes exactly what a
// launch at the live width computes.
#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/mma.cuh"
#include "kernels/rope_pair.cuh"

namespace attn1 {

constexpr int kSplit = 32;  // selection entries per split (block)
constexpr int kHeads = 4;   // heads per block: one warp each
constexpr int kThreads = kHeads * 32;
constexpr unsigned kFull = 0xffffffffu;
constexpr int kMaxSplits = 256; // selections up to 8192 entries

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

// The 8 bf16 of a 16-byte chunk, widened to f32 in channel order.
__device__ __forceinline__ void bf16x8(const uint4 &v, float (&f)[8])
{
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int t = 0; t < 4; t++) {
        f[2 * t] = __uint_as_float(w[t] << 16);
        f[2 * t + 1] = __uint_as_float(w[t] & 0xffff0000u);
    }
}

// One level of the split kernel's reduce-scatter: acc[0 .. 2W) are the entries this lane holds; it
// keeps the lower or upper W (by lane bit W) summed with its partner's, in acc[0 .. W).
template <int W> __device__ __forceinline__ void scatter_level(float (&acc)[kSplit], int lane)
{
    const bool upper = lane & W;
#pragma unroll
    for (int i = 0; i < W; i++) {
        const float keep = upper ? acc[i + W] : acc[i], send = upper ? acc[i] : acc[i + W];
        acc[i] = keep + __shfl_xor_sync(kFull, send, W);
    }
}

// A split's staging, shared by both split kernels (NT threads). The loads are issued together, not one
// after another (each round trip to memory costs ~1 us here; in a chain they were most of the split's
// time): load_entries issues the indices of the entries this thread stages (and of entry tid, for
// valid[]), the kernel its queries and the live width and row count, then stage_rows the rows those
// entries name: a thread stages chunk tid % CPR of rows tid / CPR + RPP i. ZERO: the rows of skipped
// entries are written as zeros (else left as they are: never read as values).
template <int HD, int NT> struct StagePlan {
    static constexpr int CPR = HD / 8;         // 16-byte chunks per row
    static constexpr int RPP = NT / CPR;       // rows staged per pass of the block
    static constexpr int kPass = kSplit / RPP; // passes
    static_assert(NT % CPR == 0 && kSplit % RPP == 0, "a pass stages whole rows");
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

template <int HD, int NT, bool ZERO, int PITCH>
__device__ __forceinline__ void stage_rows(const Args &a, int e0, int tid, int topk, int nb,
                                           int (&ent)[StagePlan<HD, NT>::kPass], int vi, uint4 (*rows)[PITCH],
                                           int *valid)
{
    using P = StagePlan<HD, NT>;
    const int k = tid % P::CPR;
    uint4 staged[P::kPass];
    for (int i = 0; i < P::kPass; i++) {
        const int e = e0 + tid / P::CPR + P::RPP * i;
        const int id = e < topk ? ent[i] : -1;
        ent[i] = id >= 0 && id < a.na + nb ? id : -1;
        if (ent[i] >= 0) {
            const uint16_t *src = ent[i] < a.na ? a.rows_a + (size_t)ent[i] * HD : a.rows_b + (size_t)(ent[i] - a.na) * HD;
            staged[i] = __ldg((const uint4 *)src + k);
        }
    }
    const int ev = e0 + tid;
    if (tid < kSplit)
        valid[tid] = ev < topk && vi >= 0 && vi < a.na + nb ? vi : -1;
    for (int i = 0; i < P::kPass; i++) {
        if (ZERO)
            rows[tid / P::CPR + P::RPP * i][k] = ent[i] >= 0 ? staged[i] : make_uint4(0u, 0u, 0u, 0u);
        else if (ent[i] >= 0)
            rows[tid / P::CPR + P::RPP * i][k] = staged[i];
    }
}

// One head's softmax over a split, lane r holding entry r's dot product (ok: entry r is staged):
// z = dot * scale (-inf when skipped), the split's m = max z, p_r = exp(z_r - m), l = sum p over the
// xor tree. Returns p_r.
__device__ __forceinline__ float split_softmax(float dot, bool ok, float scale, float &m, float &l)
{
    const float zl = ok ? dot * scale : -INFINITY;
    m = zl; // max is exact: any order gives the entry-order maximum
    for (int off = 16; off > 0; off >>= 1)
        m = fmaxf(m, __shfl_xor_sync(kFull, m, off));
    const float pl = ok && m != -INFINITY ? as_d_expf(zl - m) : 0.0f;
    l = pl;
    for (int off = 16; off > 0; off >>= 1)
        l += __shfl_xor_sync(kFull, l, off);
    return pl;
}

template <int HD>
__global__ void __launch_bounds__(kThreads) split_kernel(Args a)
{
    as_d_pdl_wait();
    constexpr int CPR = HD / 8;             // 16-byte chunks per row
    constexpr int CPL = CPR / 32;           // chunks per lane
    __shared__ __align__(16) uint4 rows[kSplit][CPR];
    __shared__ int valid[kSplit];
    const int split = blockIdx.x, e0 = split * kSplit;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int h = blockIdx.y * kHeads + warp;
    // the loads issued together (StagePlan): the entries, this warp's query, the live sizes, the rows
    int ent[StagePlan<HD, kThreads>::kPass], vi;
    load_entries<HD, kThreads>(a, e0, tid, ent, vi);
    float q[CPL][8];
    if (h < a.nh)
        for (int j = 0; j < CPL; j++)
            bf16x8(__ldg((const uint4 *)(a.q + (size_t)h * HD) + lane + 32 * j), q[j]);
    const int topk = a.topk_d ? min(*a.topk_d, a.topk) : a.topk;
    const int nb = a.nb_d ? min(*a.nb_d, a.nb) : a.nb;
    if (e0 >= topk)
        return; // past the live selection: the combine does not read it
    stage_rows<HD, kThreads, false>(a, e0, tid, topk, nb, ent, vi, rows, valid);
    __syncthreads();
    if (h >= a.nh)
        return;
    // QK: each lane's partial dot products of all kSplit entries (32 independent chains), then a
    // butterfly reduce-scatter: at distance w a lane keeps half of the entries it holds and sends the
    // other half to lane ^ w, so that lane r ends with entry r's sum. Each sum is added over the same
    // pairs of lanes, level by level, as an xor all-reduce (a + b = b + a): the same bits, with 31
    // shuffles for the split instead of 5 per entry. Lane r keeps z of entry r: one exponential a lane.
    static_assert(kSplit == 32, "one entry per lane after the reduce-scatter");
    float acc[kSplit];
#pragma unroll kSplit
    for (int r = 0; r < kSplit; r++) {
        float s_ = 0.0f;
#pragma unroll
        for (int j = 0; j < CPL; j++) {
            float x[8];
            bf16x8(rows[r][lane + 32 * j], x);
#pragma unroll
            for (int e = 0; e < 8; e++)
                s_ = fmaf(q[j][e], x[e], s_);
        }
        acc[r] = valid[r] >= 0 ? s_ : 0.0f; // a row not staged: never read as a value
    }
    scatter_level<16>(acc, lane);
    scatter_level<8>(acc, lane);
    scatter_level<4>(acc, lane);
    scatter_level<2>(acc, lane);
    scatter_level<1>(acc, lane);
    float m, l;
    const float pl = split_softmax(acc[0], valid[lane] >= 0, a.scale, m, l);
    // PV in entry order; kAhead entries' rows and weights are read before their FMAs
    constexpr int kAhead = 4;
    float o[CPL][8];
    for (int j = 0; j < CPL; j++)
        for (int t = 0; t < 8; t++)
            o[j][t] = 0.0f;
    if (m != -INFINITY) {
        for (int r0 = 0; r0 < kSplit; r0 += kAhead) {
            float p[kAhead];
            uint4 v[kAhead][CPL];
#pragma unroll
            for (int u = 0; u < kAhead; u++) {
                p[u] = __shfl_sync(kFull, pl, r0 + u);
#pragma unroll
                for (int j = 0; j < CPL; j++)
                    v[u][j] = rows[r0 + u][lane + 32 * j];
            }
#pragma unroll
            for (int u = 0; u < kAhead; u++) {
                if (valid[r0 + u] < 0)
                    continue; // the same for every lane
#pragma unroll
                for (int j = 0; j < CPL; j++) {
                    float x[8];
                    bf16x8(v[u][j], x);
#pragma unroll
                    for (int e = 0; e < 8; e++)
                        o[j][e] = fmaf(p[u], x[e], o[j][e]);
                }
            }
        }
    }
    float *wo = a.ws_o + ((size_t)split * a.nh + h) * HD;
    for (int j = 0; j < CPL; j++) {
        float4 *dst = (float4 *)(wo + (lane + 32 * j) * 8);
        dst[0] = make_float4(o[j][0], o[j][1], o[j][2], o[j][3]);
        dst[1] = make_float4(o[j][4], o[j][5], o[j][6], o[j][7]);
    }
    if (lane == 0) {
        a.ws_ml[((size_t)split * a.nh + h) * 2] = m;
        a.ws_ml[((size_t)split * a.nh + h) * 2 + 1] = l;
    }
}

// The split kernel on tensor cores (the default; ATTNSCOPE_ATTN_SPLIT=fma launches split_kernel): the
// same split, staging and softmax, with QK and PV as mma.sync m16n8k16 (bf16 in, f32 accumulate).
// split_kernel is bound by instruction issue (Nsight Compute, 2026-11-29: 46% of cycles issue, memory
// idle): two f32 FMAs and two widenings per row element and head. Here, with H heads a block, a warp
// does 1/H of each product for all H heads (the MMA's 8 columns: H heads, padded when H = 4):
//   QK: S^T[r][h] = rows[r] . q[h]: M = the 32 rows (2 tiles), N = heads, K = channels, each warp 1/H
//       of the channels; the warps' partials added in warp order through shared memory.
//   PV: O^T[d][h] = sum_r rows[r][d] p[h][r]: M = channels (each warp 1/H), N = heads, K = the 32
//       rows; the rows read transposed by ldmatrix.trans.
// The exponentials enter PV as two bf16 terms (hi + lo), so the product keeps them to ~2^-17 where the
// prefill's tensor-core kernels round them to bf16; the denominator sums the unrounded ones. Rows of
// skipped entries are zeros in shared memory (their p is 0, and 0 x NaN bits would not be). The rows'
// pitch is a row and 16 bytes (CPR + 1 chunks), so ldmatrix's 8 row addresses fall in 8 bank groups.
// H heads a block, a warp each for the softmax: 8 where the head count allows (the MMAs' 8 columns all
// real heads, each split's rows gathered by half as many blocks: decode graph -0.6% against 4 on the
// H200, 2026-11-30 02:20 UTC), else 4 (ATTNSCOPE_ATTN_MMA_HEADS=4 forces it, for an A/B).
template <int HD, int H> struct MmaSmem { // split_mma_kernel's shared memory (dynamic: 37-43 KB at HD 512)
    uint4 rows[kSplit][HD / 8 + 1];
    union {
        uint4 qs[H][HD / 8];        // the block's queries, until QK is done
        float sp[H][kSplit][H + 1]; // then QK's partials [warp][row][head] (+1: bank spread)
    } u;
    uint32_t pb[2][H][kSplit / 2]; // p as bf16 pairs [hi / lo][head][row pair]: p = hi + lo
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
    static_assert(kSplit == 32 && (H == 4 || H == 8) && QPT * kThreads == H * CPR && KSW * H * 16 == HD,
                  "the tiling");
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
    stage_rows<HD, kThreads, true>(a, e0, tid, topk, nb, ent, vi, rows, valid);
    if (a.early_rows) {
        as_d_pdl_wait();
        load_q();
    }
    for (int i = 0; i < QPT; i++) {
        const int j = tid + kThreads * i;
        qs[j / CPR][j % CPR] = qv[i];
    }
    __syncthreads();

    // QK, warp w: channels [16 KSW w, 16 KSW (w + 1)) of every row and head
    const uint32_t *q32 = (const uint32_t *)&qs[0][0]; // [head][HD / 2] bf16 pairs
    float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int t = 0; t < KSW; t++) {
        const int ks = warp * KSW + t;
        const uint32_t b0 = g < H ? q32[g * (HD / 2) + ks * 8 + c] : 0u;
        const uint32_t b1 = g < H ? q32[g * (HD / 2) + ks * 8 + c + 4] : 0u;
#pragma unroll
        for (int mt = 0; mt < 2; mt++) {
            uint32_t af[4];
            asmma::ldmatrix_x4(af[0], af[1], af[2], af[3], asmma::smem_u32(&rows[16 * mt + (lane & 15)][2 * ks + (lane >> 4)]));
            asmma::mma_bf16(s[mt], af, b0, b1);
        }
    }
    __syncthreads(); // every warp done with qs: sp takes its place
    if (2 * c < H)
#pragma unroll
        for (int mt = 0; mt < 2; mt++) {
            sp[warp][16 * mt + g][2 * c] = s[mt][0];
            sp[warp][16 * mt + g][2 * c + 1] = s[mt][1];
            sp[warp][16 * mt + g + 8][2 * c] = s[mt][2];
            sp[warp][16 * mt + g + 8][2 * c + 1] = s[mt][3];
        }
    __syncthreads();
    // softmax of head hb + warp, lane r: entry r (split_kernel's, from here)
    const int h = hb + warp;
    float dot = sp[0][lane][warp];
#pragma unroll
    for (int w = 1; w < H; w++) // in warp order
        dot += sp[w][lane][warp];
    float m, l;
    const float pl = split_softmax(dot, valid[lane] >= 0, a.scale, m, l);
    // p for PV's B fragments as two bf16 terms, hi = bf16(p) and lo = bf16(p - hi): their products
    // with the bf16 rows carry p to ~2^-17, not bf16's 2^-9 (PV stays within f32 rounding of the
    // reference's f32 products; the MMAs are not what bounds this kernel)
    const float ph = asmma::bf16lo(asmma::pack_bf16x2(pl, 0.0f)), plo = pl - ph;
    const float pn = __shfl_xor_sync(kFull, pl, 1), pnh = asmma::bf16lo(asmma::pack_bf16x2(pn, 0.0f));
    if (!(lane & 1)) { // even lanes: entries lane, lane + 1
        pb[0][warp][lane >> 1] = asmma::pack_bf16x2(ph, pnh);
        pb[1][warp][lane >> 1] = asmma::pack_bf16x2(plo, pn - pnh);
    }
    __syncthreads();

    // PV, warp w: channels [16 KSW w, 16 KSW (w + 1)) of every head
    float o[KSW][4];
#pragma unroll
    for (int t = 0; t < KSW; t++) {
        o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.0f;
        const int mt = warp * KSW + t;
#pragma unroll
        for (int kk = 0; kk < 2; kk++) {
            uint32_t af[4];
            const int r = 16 * kk + (lane & 7) + ((lane >> 4) << 3);
            asmma::ldmatrix_x4_trans(af[0], af[1], af[2], af[3], asmma::smem_u32(&rows[r][2 * mt + ((lane >> 3) & 1)]));
#pragma unroll
            for (int part = 0; part < 2; part++) { // hi, then lo
                const uint32_t b0 = g < H ? pb[part][g][8 * kk + c] : 0u;
                const uint32_t b1 = g < H ? pb[part][g][8 * kk + c + 4] : 0u;
                asmma::mma_bf16(o[t], af, b0, b1);
            }
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
// splits' (m, l) are read once into shared memory, their factors exp(m_j - M) computed once each;
// every thread then takes M and the denominator from them in split order (the same bits in each
// thread, no barrier for them). A thread's partials are loaded kAhead splits at a time before their
// FMAs, the first group before any barrier: loads in flight together, the FMAs in split order.
// kCombineAhead = 32 holds a whole flash selection's splits (640 entries: 20) in one group, where 8
// took three groups one after another (a memory round trip each); ATTNSCOPE_ATTN_COMBINE_AHEAD=8
// launches the 8-ahead kernel (an A/B; the same bits).
constexpr int kCombineAhead = 32;
template <int HD, int kAhead = kCombineAhead>
__global__ void __launch_bounds__(HD / 4) combine_kernel(Args a)
{
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
    float M = sink;
    for (int j = 0; j < nsplit; j++)
        M = fmaxf(M, mj[j]);
    for (int j = threadIdx.x; j < nsplit; j += blockDim.x)
        fj[j] = M != -INFINITY && mj[j] != -INFINITY ? as_d_expf(mj[j] - M) : 0.0f;
    __syncthreads();
    float den = M != -INFINITY ? as_d_expf(sink - M) : 0.0f;
    for (int j = 0; j < nsplit; j++)
        if (fj[j] != 0.0f)
            den += lj[j] * fj[j];
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (M != -INFINITY) {
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
    }
    uint16_t y[4];
    uint16_t *dst = a.o + (size_t)h * HD + c;
    for (int t = 0; t < 4; t++) {
        y[t] = den > 0.0f ? as_d_f32_to_bf16(acc[t] / den) : 0;
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

#ifndef AS_EMU // host side (bench/emu runs the kernels above on the CPU)

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

// split_mma_kernel with H heads a block: H warps, its shared memory sized for hd (256 or 512)
template <int H> static void launch_split_mma(int hd, dim3 grid, cudaStream_t st, const attn1::Args &a)
{
    if (hd == 512)
        as_launch(attn1::split_mma_kernel<512, H>, grid, H * 32, sizeof(attn1::MmaSmem<512, H>), st, a);
    else
        as_launch(attn1::split_mma_kernel<256, H>, grid, H * 32, sizeof(attn1::MmaSmem<256, H>), st, a);
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
    int rc = 0;
    if (nsplit > 0) {
        // A/B switches, read once (thread-safe): ATTNSCOPE_ATTN_SPLIT=fma, the split on CUDA cores (f32 FMAs,
        // the kernel before 2026-11-30); ATTNSCOPE_ATTN_MMA_HEADS=4, the tensor-core split with 4 heads a
        // block where 8 would do
        static const bool fma = as_env_is("ATTNSCOPE_ATTN_SPLIT", "fma"),
                          heads4 = as_env_is("ATTNSCOPE_ATTN_MMA_HEADS", "4");
        const int H = !fma && !heads4 && nh % 8 == 0 ? 8 : attn1::kHeads;
        a.early_rows = early_rows && !fma; // (the engine reads ATTNSCOPE_ATTN_EARLY: the caller decides)
        dim3 grid((unsigned)nsplit, (unsigned)(nh / H));
        if (fma)
            as_launch(hd == 512 ? attn1::split_kernel<512> : attn1::split_kernel<256>, grid, attn1::kThreads, 0, st, a);
        else if (H == 8)
            launch_split_mma<8>(hd, grid, st, a);
        else
            launch_split_mma<attn1::kHeads>(hd, grid, st, a);
        rc = AS_LAUNCH_RESULT();
    }
    if (!rc) {
        // ATTNSCOPE_ATTN_COMBINE_AHEAD=8: the partials loaded 8 splits at a time (the kernel before
        // 2026-11-30), for an A/B (read once, thread-safe)
        static const bool ahead8 = as_env_is("ATTNSCOPE_ATTN_COMBINE_AHEAD", "8");
        if (hd == 512)
            as_launch(ahead8 ? attn1::combine_kernel<512, 8> : attn1::combine_kernel<512>, nh, 512 / 4, 0, st, a);
        else
            as_launch(ahead8 ? attn1::combine_kernel<256, 8> : attn1::combine_kernel<256>, nh, 256 / 4, 0, st, a);
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
