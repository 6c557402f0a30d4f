// Sparse attention with the attention sink on Hopper's warpgroup MMA (wgmma, sm_90a): the prefill
// form of kernels/sparse_attn.cu for hd 512 (the flash geometry). Same math, same twin
// (as_sparse_attention in ref/attention.c), same tests (tests/gpu_sparse_attn.c, path 3):
//
//   z_i = (q[t][h] . row_i) * scale over the selected rows i = idx[t][j] (j < topk; entries < 0 or
//         >= na + nb are skipped; i < na reads rows_a[i], else rows_b[i - na])
//   m = max(sink[h], max z);  den = exp(sink[h] - m) + sum_i exp(z_i - m)
//   o[t][h] = bf16( sum_i exp(z_i - m) / den * row_i )            (no selected row: o = 0)
//
// Why a second kernel: the mma.sync kernel feeds every warp's tensor-core operands through ldmatrix,
// one copy per warp, about 6 MAC per shared-memory byte, which caps it near 20% of the tensor-core
// rate (bench/KERNELS.md). A warpgroup's wgmma reads its shared operands once for 64 rows.
//
// One block per (query t, 64-head block): 256 threads = two warpgroups, wg 0 and wg 1.
//   shared memory (1024-aligned, 128-byte swizzle, kernels/wgmma.cuh): Q [64 heads][512] (64 KB),
//   two stages of 64 gathered rows [64][512] (64 KB each, cp.async; a skipped index is zero-filled
//   and masked), an f32 exchange tile per warpgroup (16 KB each), the stages' row-validity flags.
//   per tile of 64 selected rows, warpgroup w:
//     S_w = Q[:, 256 w .. +256] . R[:, 256 w .. +256]^T    16 x wgmma m64n64k16 (both from shared)
//     S = S_w + S_(1-w) through shared memory (each adds the other's half to its own: fp addition
//       commutes, so both warpgroups hold the same bits), z = S * scale, -inf for skipped rows;
//     online softmax per head exactly as the mma.sync kernel (running max without the sink, running
//       sum of unrounded exp, P rounded to bf16 for the product);
//     O_w = O_w * alpha + bf16(P) . R[:, 256 w .. +256]      4 x wgmma m64n256k16 (P from registers)
//   The next tile's rows are in flight (cp.async) while a tile is computed; the selection entries
//   two tiles ahead are read into registers meanwhile.
//   end: the sink is folded in as in the mma.sync kernel, the bf16 rows staged in the Q buffer and
//   written with coalesced 16-byte stores.
// No split over the selection: the launcher takes this kernel where s x head blocks fill the device
// (prefill); decode and short chunks keep kernels/sparse_attn.cu and kernels/attn_decode.cu.
#include <math.h>
#include <stdint.h>

#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/mma.cuh"
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
constexpr uint32_t kFlagBytes = 2 * kTR * 4;
constexpr uint32_t kSmemBytes = 1024 + kQBytes + 2 * kRBytes + kXBytes + kFlagBytes; // 230912
constexpr float kLog2e = 1.4426950408889634f;
static_assert(kHB == kTR, "Q and a row tile share one layout");

// Byte offset of 16-byte chunk `ch` (0..63) of row `row` in a swizzled 64-row tile.
__device__ __forceinline__ uint32_t tile_off(int row, int ch)
{
    return (uint32_t)((ch >> 3) * kBlk + row * 128 + (((ch & 7) ^ (row & 7)) << 4));
}

struct WgArgs {
    const uint16_t *q;
    const uint16_t *rows_a;
    int na;
    const uint16_t *rows_b;
    int nb;
    const int32_t *idx;
    int topk;
    const float *sink;
    uint16_t *o;
    int nh;
    float scale;
};

__global__ void __launch_bounds__(kThreads, 1) sparse_attn_wgmma_kernel(WgArgs a)
{
    as_d_pdl_wait();
#ifdef AS_WGMMA
    extern __shared__ uint8_t smem_raw[];
    // 1024-aligned base (the swizzle atoms' alignment, descriptor base offset 0)
    const uint32_t raw = smem_u32(smem_raw), pad = ((raw + 1023u) & ~1023u) - raw;
    uint8_t *smem = smem_raw + pad;
    uint8_t *sq = smem;                                       // Q, later the bf16 output
    uint8_t *sr = smem + kQBytes;                             // [2][64 rows][512]
    float4 *sx = (float4 *)(smem + kQBytes + 2 * kRBytes);    // [2 wg][8][128 threads]
    int *sflag = (int *)(smem + kQBytes + 2 * kRBytes + kXBytes); // [2][64]: row valid
    const uint32_t sq_a = smem_u32(sq), sr_a = smem_u32(sr);

    const int tid = threadIdx.x, wg = tid >> 7, tig = tid & 127, lane = tid & 31;
    const int wi = tig >> 5, g = lane >> 2, c4 = lane & 3;
    const int t = blockIdx.x, h0 = blockIdx.y * kHB;
    const int64_t nrows = (int64_t)a.na + a.nb;
    const int ntiles = (a.topk + kTR - 1) / kTR;
    const int32_t *sel = a.idx + (int64_t)t * a.topk;

    // The copy pattern of a 64-row tile: thread tid moves chunk (tid % 64) of rows tid / 64 + 4 i.
    const int cp_ch = tid & 63, cp_r0 = tid >> 6;
    {
        const uint16_t *qt = a.q + ((int64_t)t * a.nh + h0) * kHD;
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const int r = cp_r0 + 4 * i;
            const bool ok = h0 + r < a.nh;
            cp_async16(sq_a + tile_off(r, cp_ch), ok ? qt + (int64_t)r * kHD + cp_ch * 8 : a.q, ok ? 16 : 0);
        }
    }
    int ent[16]; // this thread's 16 selection entries of the next tile to load
    auto read_entries = [&](int it) {
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const int e = it * kTR + cp_r0 + 4 * i;
            ent[i] = e < a.topk ? __ldg(sel + e) : -1;
        }
    };
    auto load_tile = [&](int it) {
        const int stage = it & 1;
        const uint32_t dst = sr_a + stage * kRBytes;
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const int r = cp_r0 + 4 * i;
            const int64_t v = ent[i];
            const bool ok = v >= 0 && v < nrows;
            const uint16_t *src = a.q; // any valid address: nothing is read for a skipped row
            if (ok)
                src = (v < a.na ? a.rows_a + v * kHD : a.rows_b + (v - a.na) * kHD) + cp_ch * 8;
            cp_async16(dst + tile_off(r, cp_ch), src, ok ? 16 : 0);
            if (cp_ch == 0)
                sflag[stage * kTR + r] = ok;
        }
    };
    if (ntiles > 0) {
        read_entries(0);
        load_tile(0);
    }
    cp_async_commit(); // group: Q + tile 0
    if (ntiles > 1)
        read_entries(1);

    float acc_o[128];
#pragma unroll
    for (int i = 0; i < 128; i++)
        acc_o[i] = 0.0f;
    float m_run[2] = {-INFINITY, -INFINITY}; // rows g, g + 8 of warp wi: heads 16 wi + g, + 8
    float l_run[2] = {0.0f, 0.0f};           // this thread's part of the row sums

    for (int it = 0; it < ntiles; it++) {
        const int stage = it & 1;
        cp_async_wait<0>();
        aswg::fence_proxy_async();
        __syncthreads(); // tile `it` (and Q) landed and visible to wgmma; everyone is done with tile it - 1
        if (it + 1 < ntiles) {
            load_tile(it + 1);
            cp_async_commit();
            if (it + 2 < ntiles)
                read_entries(it + 2);
        }
        const uint32_t rt = sr_a + stage * kRBytes;

        // ---- S_w = Q[:, half w] . R[:, half w]^T (64 heads x 64 rows, K = 256)
        float s[32];
#pragma unroll
        for (int i = 0; i < 32; i++)
            s[i] = 0.0f;
        aswg::pin(s);
        aswg::fence();
#pragma unroll
        for (int k = 0; k < 16; k++) {
            const uint32_t off = (uint32_t)(4 * wg + (k >> 2)) * kBlk + (uint32_t)(k & 3) * 32;
            aswg::wgmma_m64n64k16_ss(s, aswg::desc_sw128(sq_a + off, 16, 1024), aswg::desc_sw128(rt + off, 16, 1024));
        }
        aswg::commit();
        aswg::wait<0>();
        aswg::pin(s);

        // ---- S = S_w + S_other: the thread of the same index in the other warpgroup holds the same elements
#pragma unroll
        for (int j = 0; j < 8; j++)
            sx[(wg * 8 + j) * 128 + tig] = make_float4(s[4 * j], s[4 * j + 1], s[4 * j + 2], s[4 * j + 3]);
        asmma::bar_named(1, kThreads);
        const int *valid = sflag + stage * kTR;
        float z[32];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const float4 o4 = sx[((1 - wg) * 8 + j) * 128 + tig];
            const bool v0 = valid[j * 8 + 2 * c4] != 0, v1 = valid[j * 8 + 2 * c4 + 1] != 0;
            z[4 * j + 0] = v0 ? (s[4 * j + 0] + o4.x) * a.scale : -INFINITY;
            z[4 * j + 1] = v1 ? (s[4 * j + 1] + o4.y) * a.scale : -INFINITY;
            z[4 * j + 2] = v0 ? (s[4 * j + 2] + o4.z) * a.scale : -INFINITY;
            z[4 * j + 3] = v1 ? (s[4 * j + 3] + o4.w) * a.scale : -INFINITY;
        }
        // ---- online softmax, rows g (e = 0, 1) and g + 8 (e = 2, 3)
        float alpha[2], m_use[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < 8; j++)
                mx = fmaxf(mx, fmaxf(z[4 * j + 2 * r], z[4 * j + 2 * r + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float m_new = fmaxf(m_run[r], mx);
            m_use[r] = m_new == -INFINITY ? 0.0f : m_new; // nothing seen yet: exp(-inf - 0) = 0
            alpha[r] = exp2f((m_run[r] - m_use[r]) * kLog2e);
            m_run[r] = m_new;
        }
#pragma unroll
        for (int i = 0; i < 32; i++)
            z[i] = exp2f((z[i] - m_use[(i >> 1) & 1]) * kLog2e); // z now holds p
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float ls = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++)
                ls += z[4 * j + 2 * r] + z[4 * j + 2 * r + 1];
            l_run[r] = l_run[r] * alpha[r] + ls;
        }
#pragma unroll
        for (int j = 0; j < 32; j++) {
            acc_o[4 * j + 0] *= alpha[0];
            acc_o[4 * j + 1] *= alpha[0];
            acc_o[4 * j + 2] *= alpha[1];
            acc_o[4 * j + 3] *= alpha[1];
        }
        // ---- O_w += bf16(P) . R[:, half w]: K = 64 rows (4 k-steps of 16), N = 256 dims
        uint32_t pf[4][4];
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            pf[kk][0] = pack_bf16x2(z[8 * kk + 0], z[8 * kk + 1]); // row g, rows 16 kk + 2 c4 (+1)
            pf[kk][1] = pack_bf16x2(z[8 * kk + 2], z[8 * kk + 3]); // row g + 8
            pf[kk][2] = pack_bf16x2(z[8 * kk + 4], z[8 * kk + 5]); // row g, rows 16 kk + 8 + 2 c4
            pf[kk][3] = pack_bf16x2(z[8 * kk + 6], z[8 * kk + 7]); // row g + 8
        }
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
            aswg::pin(pf[kk]);
        aswg::pin(acc_o);
        aswg::fence();
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
            aswg::wgmma_m64n256k16_rs(acc_o, pf[kk],
                                      aswg::desc_sw128(rt + (uint32_t)(4 * wg) * kBlk + (uint32_t)kk * 16 * 128, kBlk,
                                                       1024));
        aswg::commit();
        aswg::wait<0>();
        aswg::pin(acc_o);
    }
    cp_async_wait<0>();

    // Row sums over the quad (same association in all four lanes and in both warpgroups).
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
    }
    const int hl[2] = {wi * 16 + g, wi * 16 + g + 8}; // local heads of rows g, g + 8
    float f[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int h = h0 + hl[r];
        const float sk = h < a.nh ? a.sink[h] : 0.0f;
        if (m_run[r] == -INFINITY) {
            f[r] = 0.0f; // no selected row: o = 0
        } else {
            const float M = fmaxf(m_run[r], sk);
            const float e = expf(m_run[r] - M);
            f[r] = e / (expf(sk - M) + l_run[r] * e);
        }
    }
    __syncthreads(); // every warpgroup is done reading Q
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
        for (int j = 0; j < 32; j++)
            *(uint32_t *)(sq + tile_off(hl[r], wg * 32 + j) + c4 * 4) =
                pack_bf16x2(acc_o[4 * j + 2 * r] * f[r], acc_o[4 * j + 2 * r + 1] * f[r]);
    __syncthreads();
    uint16_t *ot = a.o + ((int64_t)t * a.nh + h0) * kHD;
#pragma unroll
    for (int i = 0; i < 16; i++) {
        const int r = cp_r0 + 4 * i;
        if (h0 + r < a.nh)
            *(uint4 *)(ot + (int64_t)r * kHD + cp_ch * 8) = *(const uint4 *)(sq + tile_off(r, cp_ch));
    }
#else
    (void)a, (void)kLog2e, (void)tile_off(0, 0);
    __trap(); // not the sm_90a code: the launcher never gets here (device_is_sm90)
#endif // AS_WGMMA
}

bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

// Whether the current device runs the sm_90a code (compute capability 9.0 exactly), per device.
bool device_is_sm90()
{
    static int cached[64]; // 0 unknown, 1 yes, 2 no
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0)
        return false;
    if (dev < 64 && cached[dev])
        return cached[dev] == 1;
    int major = 0, minor = 0;
    const bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
                    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess &&
                    major == 9 && minor == 0;
    if (dev < 64)
        cached[dev] = ok ? 1 : 2;
    return ok;
}

} // namespace

extern "C" int as_k_sparse_attn_wgmma_applies(int nh, int hd, int topk, const void *q, const void *o,
                                              const void *rows_a, int na, const void *rows_b, int nb)
{
    return hd == kHD && nh > 0 && nh % 16 == 0 && topk > 0 && aligned16(q) && aligned16(o) &&
           (na == 0 || aligned16(rows_a)) && (nb == 0 || aligned16(rows_b)) && device_is_sm90();
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
    const int nhb = nh / kHB + (nh % kHB != 0);
    if (s > 0x7fffffff || nhb > 65535)
        return (int)cudaErrorInvalidValue;
    static bool attr_done[64];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess)
        return (int)cudaErrorInvalidDevice;
    if (dev < 0 || dev >= 64 || !attr_done[dev]) {
        cudaError_t e = cudaFuncSetAttribute(sparse_attn_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)kSmemBytes);
        if (e != cudaSuccess)
            return (int)e;
        if (dev >= 0 && dev < 64)
            attr_done[dev] = true;
    }
    WgArgs a{q, rows_a, na, rows_b, nb, idx, topk, sink, o, nh, scale};
    as_launch(sparse_attn_wgmma_kernel, dim3((unsigned)s, (unsigned)nhb), kThreads, kSmemBytes, st, a);
    return AS_LAUNCH_RESULT();
}
