// Prefill GEMM of the fp8 linear on Hopper's fp8 tensor cores (twin: ref/fp8_linear.c; test:
// tests/gpu_fp8_gemm.c; bench: bench/kernels_bench.cu):
//
//   y[t][o] = bf16( sum_k P_k[t][o] * sx[t][k] * ws[o / 32][k] ),  P_k = sum_{i in k} xq[t][i] Wq[o][i]
//
// for every 32-wide K block k in order, as SPEC 2's fp8 linear (DeepGEMM's promotion, at the checkpoint's
// 32-wide blocks instead of 128). cuBLASLt cannot take these scales on sm_90: its block scales there are
// 1 x 128 and 128 x 128 (CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, BLK128x128_32F); VEC32_UE8M0 is
// Blackwell's.
//
// One block of two warpgroups per 128 tokens x 128 outputs; warpgroup w owns tokens 64 w .. 64 w + 63.
//   shared memory (1024-aligned, 128-byte swizzle, kernels/wgmma.cuh's layout): 4 stages, each the
//   tokens' codes [128][128 bytes] (A), the weights' codes [128][128 bytes] (B), the tokens' scales of
//   the stage's 4 K blocks [128][4] and the weights' [4 row blocks][4]; a row of 128 bytes is one column
//   block of the swizzle: 16-byte chunk c of row r at r * 128 + ((c ^ (r % 8)) << 4). Both operands are
//   K-major (fp8 wgmma takes no transpose), as S = Q R^T in kernels/sparse_attn_wgmma.cu: SBO = 1024
//   (the next 8 rows), a 32-byte K step inside the row adds 32 to the start address.
//   per stage, per K block k (4 of them, one wgmma each):
//     T = A_w[:, k] . B[:, k]^T        wgmma m64n128k32 e4m3, accumulators overwritten (scale-d 0)
//     acc += T * (sx[t][k] * ws[o/32][k])   in registers: the accumulator fragment's rows g, g + 8 and
//                                       columns 8 j + 2 c (+1) of warp w's 16 rows (kernels/mma.cuh's C)
//   the stages are filled with cp.async three ahead; the two warpgroups' products and promotions
//   interleave on the SM (one warpgroup's wgmma runs while the other scales).
//   end: acc to bf16, two outputs a store.
// Rows past s or n_out and K blocks past n_in are zero-filled and skipped; any s, n_out and n_in a
// multiple of 32. Blocks run over the tokens fastest: consecutive blocks share one weight tile.
#include <stdint.h>

#include "kernels/common.cuh"
#include "kernels/fp8.cuh"
#include "kernels/kernels.h"
#include "kernels/mma.cuh"
#include "kernels/wgmma.cuh"

// kernels/fp8_gemv.cu's explicit entry (the fallback below)
extern "C" int as_k_fp8_gemv_cfg(const AsFp8Weight *w, const AsFp8Act *x, const as_bf16_t *xb, int64_t ldx,
                                 int64_t stride_x, int m, void *y, int64_t ldy, int64_t stride_y, int y_f32, int Wn,
                                 int portable, cudaStream_t st);

namespace {

using asmma::cp_async16;
using asmma::cp_async_commit;
using asmma::cp_async_wait;
using asmma::smem_u32;

constexpr int kThreads = 256;
constexpr int kBM = 128, kBN = 128, kBK = 128; // tokens, outputs, K bytes (4 blocks of 32) a stage
constexpr int kStages = 4;
constexpr uint32_t kTileBytes = 128 * 128;                // A or B of a stage
constexpr uint32_t kOffB = kTileBytes, kOffSx = 2 * kTileBytes, kOffSw = kOffSx + kBM * 16;
constexpr uint32_t kStageBytes = (kOffSw + 4 * 16 + 1023) / 1024 * 1024; // 35840
constexpr uint32_t kSmemBytes = 1024 + kStages * kStageBytes;
static_assert(kSmemBytes <= 227 * 1024, "an sm_90 block's shared memory");

struct GemmArgs {
    AsFp8Weight w;
    AsFp8Act x;
    int s;
    uint16_t *y;
    int64_t ldy;
};

// Byte offset of 16-byte chunk ch (0..7) of row r in a stage's swizzled 128-byte-row tile.
__device__ __forceinline__ uint32_t tile_off(int r, int ch) { return (uint32_t)(r * 128 + ((ch ^ (r & 7)) << 4)); }

__global__ void __launch_bounds__(kThreads, 1) fp8_gemm_kernel(GemmArgs a)
{
    as_d_pdl_wait();
#ifdef AS_WGMMA
    AS_DYNAMIC_SMEM(smem_raw);
    const uint32_t raw = smem_u32(smem_raw), pad = ((raw + 1023u) & ~1023u) - raw;
    uint8_t *smem = smem_raw + pad;
    const uint32_t base = raw + pad;

    // wg through a broadcast, as kernels/sparse_attn_wgmma.cu: warp-uniform, the descriptors in uniform
    // registers
    const int tid = threadIdx.x, wg = __shfl_sync(0xffffffffu, tid >> 7, 0), lane = tid & 31;
    const int wi = (tid & 127) >> 5, g = lane >> 2, c = lane & 3;
    const int m0 = (int)blockIdx.x * kBM, n0 = (int)blockIdx.y * kBN;
    const int K = a.w.n_in, nk = K / 32, nst = (K + kBK - 1) / kBK;
    const int nrb = (a.w.n_out + 31) / 32;

    // The copy pattern of a stage: chunk tid + 256 i (i < 4) of A and of B (row / 8, chunk % 8); the
    // tokens' scales by threads 0..127 (a row each), the weights' by 128..131.
    auto load_stage = [&](int st, int slot) {
        const uint32_t sb = base + (uint32_t)slot * kStageBytes;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int q = tid + kThreads * i, r = q >> 3, ch = q & 7;
            const int kbyte = st * kBK + 16 * ch;
            const bool kin = kbyte < K;
            const bool aok = kin && m0 + r < a.s, bok = kin && n0 + r < a.w.n_out;
            cp_async16(sb + tile_off(r, ch), aok ? a.x.q + (int64_t)(m0 + r) * a.x.ldq + kbyte : a.x.q, aok ? 16 : 0);
            cp_async16(sb + kOffB + tile_off(r, ch), bok ? a.w.w + (int64_t)(n0 + r) * a.w.ldw + kbyte : a.w.w,
                       bok ? 16 : 0);
        }
        if (tid < kBM) {
            const bool ok = m0 + tid < a.s;
            cp_async16(sb + kOffSx + 16 * tid, ok ? a.x.s + (int64_t)(m0 + tid) * a.x.lds + 4 * st : a.x.s, ok ? 16 : 0);
        } else if (tid < kBM + 4) {
            const int rb = n0 / 32 + tid - kBM;
            const bool ok = rb < nrb;
            cp_async16(sb + kOffSw + 16 * (tid - kBM), ok ? a.w.ws + (int64_t)rb * a.w.ldws + 4 * st : a.w.ws,
                       ok ? 16 : 0);
        }
    };
#pragma unroll
    for (int st = 0; st < kStages - 1; st++) {
        if (st < nst)
            load_stage(st, st);
        cp_async_commit(); // a group for every stage, loaded or not: the waits below count them
    }

    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; i++)
        acc[i] = 0.0f;
    const int r_lo = 64 * wg + 16 * wi + g; // the fragment's rows in the tile: r_lo, r_lo + 8
    for (int it = 0; it < nst; it++) {
        const int slot = it % kStages;
        cp_async_wait<kStages - 2>();
        aswg::fence_proxy_async();
        __syncthreads(); // stage it landed and is visible to wgmma; every warpgroup is done with stage it - 1
        if (it + kStages - 1 < nst)
            load_stage(it + kStages - 1, (it + kStages - 1) % kStages);
        cp_async_commit();

        const uint32_t sb = base + (uint32_t)slot * kStageBytes;
        const uint64_t da = aswg::desc_sw128(sb + (uint32_t)(64 * wg) * 128, 16, 1024);
        const uint64_t db = aswg::desc_sw128(sb + kOffB, 16, 1024);
        const float *sxs = (const float *)(smem + (uint32_t)slot * kStageBytes + kOffSx);
        const float *sws = (const float *)(smem + (uint32_t)slot * kStageBytes + kOffSw);
#pragma unroll
        for (int kb = 0; kb < 4; kb++) {
            if (4 * it + kb >= nk) // past n_in (uniform)
                break;
            float t[64];
            aswg::pin(acc);
            aswg::fence();
            asfp8::wgmma_m64n128k32_e4m3(t, da + (uint64_t)(2 * kb), db + (uint64_t)(2 * kb)); // + 32 bytes
            aswg::commit();
            aswg::wait<0>();
            aswg::pin(t);
            const float sx_lo = sxs[4 * r_lo + kb], sx_hi = sxs[4 * (r_lo + 8) + kb];
            float s_lo[4], s_hi[4];
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const float w = sws[4 * q + kb];
                s_lo[q] = sx_lo * w;
                s_hi[q] = sx_hi * w;
            }
#pragma unroll
            for (int j = 0; j < 16; j++) {
                acc[4 * j + 0] = fmaf(t[4 * j + 0], s_lo[j / 4], acc[4 * j + 0]);
                acc[4 * j + 1] = fmaf(t[4 * j + 1], s_lo[j / 4], acc[4 * j + 1]);
                acc[4 * j + 2] = fmaf(t[4 * j + 2], s_hi[j / 4], acc[4 * j + 2]);
                acc[4 * j + 3] = fmaf(t[4 * j + 3], s_hi[j / 4], acc[4 * j + 3]);
            }
        }
    }
    cp_async_wait<0>();

    const bool pairs = ((uintptr_t)a.y & 3) == 0 && a.ldy % 2 == 0;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int t = m0 + r_lo + 8 * h;
        if (t >= a.s)
            continue;
        uint16_t *yr = a.y + (int64_t)t * a.ldy;
#pragma unroll
        for (int j = 0; j < 16; j++) {
            const int o = n0 + 8 * j + 2 * c;
            const float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
            if (pairs && o + 1 < a.w.n_out) {
                *(uint32_t *)(yr + o) = asmma::pack_bf16x2(v0, v1);
            } else {
                if (o < a.w.n_out)
                    yr[o] = as_d_f32_to_bf16(v0);
                if (o + 1 < a.w.n_out)
                    yr[o + 1] = as_d_f32_to_bf16(v1);
            }
        }
    }
#else
    (void)a, (void)tile_off(0, 0), (void)kBK, (void)kOffB;
    __trap(); // not the sm_90a code: the launcher never gets here (as_k_fp8_gemm_applies)
#endif // AS_WGMMA
}


} // namespace

#ifndef AS_EMU // host side (tools/emu runs the kernels above on the CPU)
extern "C" int as_k_fp8_gemm_applies(const AsFp8Weight *w, const AsFp8Act *x)
{
    if (!w || !x || !w->w || !w->ws || !x->q || !x->s || w->n_in <= 0 || w->n_in % 32 || w->batch != 1)
        return 0;
    const int64_t nk4 = (w->n_in / 32 + 3) / 4 * 4; // a stage copies 4 scales of every row
    return as_aligned16(w->w) && w->ldw % 16 == 0 && w->ldw >= w->n_in && as_aligned16(w->ws) && w->ldws % 4 == 0 &&
           w->ldws >= nk4 && as_aligned16(x->q) && x->ldq % 16 == 0 && x->ldq >= w->n_in && as_aligned16(x->s) &&
           x->lds % 4 == 0 && x->lds >= nk4 && as_compute_capability() == 90;
}

// fallback: the GEMV path even where the wgmma kernel applies (the tests' check of it); not in kernels.h.
extern "C" int as_k_fp8_gemm_cfg(const AsFp8Weight *w, const AsFp8Act *x, int s, as_bf16_t *y, int64_t ldy,
                                 int fallback, cudaStream_t st)
{
    if (!w || !x || s < 0 || w->n_out < 0 || w->batch != 1 || !y || ldy < w->n_out)
        return (int)cudaErrorInvalidValue;
    if (s == 0 || w->n_out == 0)
        return 0;
    if (fallback || !as_k_fp8_gemm_applies(w, x)) { // elsewhere: the GEMV, 8 token rows a launch
        for (int t0 = 0; t0 < s; t0 += 8) {
            AsFp8Act xt = *x;
            xt.q += (int64_t)t0 * x->ldq;
            xt.s += (int64_t)t0 * x->lds;
            const int rc = as_k_fp8_gemv_cfg(w, &xt, nullptr, 0, 0, s - t0 < 8 ? s - t0 : 8, y + (int64_t)t0 * ldy,
                                             ldy, 0, 0, 0, 0, st);
            if (rc)
                return rc;
        }
        return 0;
    }
    const int gm = (s + kBM - 1) / kBM, gn = (w->n_out + kBN - 1) / kBN;
    if (gn > 65535)
        return (int)cudaErrorInvalidValue;
    const int rc = as_allow_dynamic_smem<fp8_gemm_kernel>((int)kSmemBytes);
    if (rc)
        return rc;
    const GemmArgs a{*w, *x, s, y, ldy};
    as_launch(fp8_gemm_kernel, dim3((unsigned)gm, (unsigned)gn), kThreads, kSmemBytes, st, a);
    return AS_LAUNCH_RESULT();
}

extern "C" int as_k_fp8_gemm(const AsFp8Weight *w, const AsFp8Act *x, int s, as_bf16_t *y, int64_t ldy, cudaStream_t st)
{
    return as_k_fp8_gemm_cfg(w, x, s, y, ldy, 0, st);
}

#endif // AS_EMU
