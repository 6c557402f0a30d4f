// Q2_K matrix-matrix product for any number of token rows (prefill), batched (twin:
// as_vec_dot_q2_K_q8_1 in model/quants.c per output, test: tests/gpu_q2k.c, bench:
// bench/kernels_bench.cu). Same arguments and result as kernels/q2k_mmvq.cu, m unbounded.
//
// Choice: int8 tensor cores on the exact integers (mma.sync m16n8k32 s8 x s8 -> s32, sm_80+), not
// dequantisation to bf16: a bf16 weight would round d * sc * q - dmin * m and the result could not
// be held to 1 bf16 ulp of the twin. Per output (o, t), Q2_K block kb and q8_1 block j of it (32
// weights = two 16-weight sub-blocks with 4-bit scales sc and mins mn):
//   Id_j = sum_k (q_k * sc_k) u_k     Im_j = sum_k mn_k u_k     (two mma, exact integers)
//   bd  += d8_j * Id_j,  bm += d8_j * Im_j                     (f32, j = 0..7)
//   acc += dx * bd - dy * bm                                   (f32, once per Q2_K block)
// i.e. the twin's sum with its f32 roundings grouped differently: the results agree to f32 rounding
// (the test: 1 bf16 ulp, or the f32 ordering bound where the sum cancels).
// A operands are built in registers from the Q2_K words (q * sc fits an int8: <= 45; the min is
// splatted); every mma starts from q2k::kBias so its int32 reads as an exact float after one
// subtraction (no I2F).
//
// Tiles: CTA of 4 warps = 128 rows x 32 tokens; a warp = 32 rows (2 m16 tiles) x 32 tokens (4 n8
// tiles); per thread 3 x 32 f32 accumulators (acc, bd, bm). Per Q2_K block the CTA stages in shared
// memory the raw blocks of its 128 rows (21 words each, rows 28 words apart: conflict-free for the
// 8 rows x 4 words a fragment load touches) and the 8 q8_1 blocks of its 32 tokens (72 words each,
// tokens 76 words apart: conflict-free likewise) with cp.async: 4-byte copies for the Q2_K rows (84-byte
// blocks are only 4-byte aligned), 16-byte copies for the q8_1 rows where aligned (mmq_b16; 4-byte
// otherwise); two stages (47 KB): block kb + 1 is in flight while kb is computed. Rows and tokens
// past the end are clamped for loads and never stored. grid = (ceil(n_out / 128), ceil(m / 32), batch).
#include "kernels/kernels.h"
#include "kernels/q2k.cuh"

namespace {

constexpr int kMqWarps = 4, kMT = 2, kNT = 4;
constexpr int kMqThreads = kMqWarps * 32;
constexpr int kBM = kMqWarps * 16 * kMT; // 128 rows per CTA
constexpr int kBN = 8 * kNT;           // 32 tokens per CTA

// Whether every token row's 8 q8_1 blocks of a Q2_K block (288 bytes at 36 (t ldx + b strideX + 8 kb))
// start 16-byte aligned: xq aligned and ldx, strideX multiples of 4 blocks (always in the engine).
inline bool mmq_b16(const void *xq, int64_t ldx, int64_t strideX, int batch)
{
    return ((uintptr_t)xq & 15) == 0 && ldx % 4 == 0 && (batch <= 1 || strideX % 4 == 0);
}

#ifdef AS_EMU
// mma.m16n8k32.row.col.s32.s8.s8.s32 with C = q2k::kBias on the emulator: lane (g, c) gathers rows
// g and g + 8 of A from lanes 4g .. 4g + 3 and columns 2c, 2c + 1 of B from lanes 8c .. 8c + 7.
void mma_s8_bias(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    const int lane = (int)(threadIdx.x & 31), g = lane >> 2, c = lane & 3;
    int8_t A[2][32], B[2][32]; // A[row g / g + 8][k], B[col 2c / 2c + 1][k]
    for (int src = 0; src < 4; src++) {
        uint32_t r[4];
        for (int i = 0; i < 4; i++)
            r[i] = emu::xchg_u32(a[i], 4 * g + src);
        for (int e = 0; e < 4; e++) {
            A[0][4 * src + e] = (int8_t)(r[0] >> 8 * e);
            A[1][4 * src + e] = (int8_t)(r[1] >> 8 * e);
            A[0][16 + 4 * src + e] = (int8_t)(r[2] >> 8 * e);
            A[1][16 + 4 * src + e] = (int8_t)(r[3] >> 8 * e);
        }
        for (int n = 0; n < 2; n++) {
            const uint32_t x0 = emu::xchg_u32(b0, 4 * (2 * c + n) + src), x1 = emu::xchg_u32(b1, 4 * (2 * c + n) + src);
            for (int e = 0; e < 4; e++) {
                B[n][4 * src + e] = (int8_t)(x0 >> 8 * e);
                B[n][16 + 4 * src + e] = (int8_t)(x1 >> 8 * e);
            }
        }
    }
    for (int i = 0; i < 4; i++) {
        int s = q2k::kBias;
        for (int k = 0; k < 32; k++)
            s += (int)A[i >> 1][k] * (int)B[i & 1][k];
        d[i] = s;
    }
}
#else
// d = a * b + kBias; fragments (g = lane / 4, c = lane % 4, 4 int8 per register, lower k in the low
// byte): a0 (row g, k 4c..) a1 (row g+8, k 4c..) a2 (row g, k 16+4c..) a3 (row g+8, k 16+4c..);
// b0 (k 4c.., col g) b1 (k 16+4c.., col g); d0 (g, 2c) d1 (g, 2c+1) d2 (g+8, 2c) d3 (g+8, 2c+1).
__device__ __forceinline__ void mma_s8_bias(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%10, %10, %10, %10};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(q2k::kBias));
}
#endif

constexpr int kAWords = sizeof(AsBlockQ2K) / 4;      // 21: scales 0..3, qs 4..19, d | dmin 20
constexpr int kBWords = 8 * sizeof(AsBlockQ8_1) / 4; // 72: 8 q8_1 blocks of 9 words (d | s, qs)
constexpr int kAStride = 28, kBStride = 76;          // padded: 28 g and 76 g mod 32 = 4 banks apart

struct __align__(16) Stage {
    uint32_t a[kBM * kAStride];
    uint32_t b[kBN * kBStride];
};

#ifdef AS_EMU
inline void cp_async4(uint32_t *dst, const uint32_t *src) { *dst = *src; }
inline void cp_async16(uint32_t *dst, const uint32_t *src) { memcpy(dst, src, 16); }
inline void cp_async_commit() {}
inline void cp_async_wait1() {}
#else
__device__ __forceinline__ void cp_async4(uint32_t *dst, const uint32_t *src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src)
                 : "memory");
}
__device__ __forceinline__ void cp_async16(uint32_t *dst, const uint32_t *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait1() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }
#endif

// Stage Q2_K block kb of the CTA's rows and q8_1 blocks 8 kb .. 8 kb + 7 of its tokens.
__device__ __forceinline__ void load_stage(Stage &st, const q2k::Args &a, const AsBlockQ2K *Wb, const AsBlockQ8_1 *Xb,
                                           int row0, int tok0, int kb)
{
    for (int w = threadIdx.x; w < kBM * kAWords; w += kMqThreads) {
        const int r = w / kAWords, k = w - r * kAWords;
        const int o = row0 + r < a.n_out ? row0 + r : a.n_out - 1;
        cp_async4(&st.a[r * kAStride + k], (const uint32_t *)(Wb + (int64_t)o * a.ldw + kb) + k);
    }
    if (a.b16) { // 18 chunks of 16 bytes per token (the token stride, 304 bytes, keeps them aligned)
#pragma unroll 1 // unrolled, the hoisted addresses cost 66 registers
        for (int w = threadIdx.x; w < kBN * (kBWords / 4); w += kMqThreads) {
            const int n = w / (kBWords / 4), k = 4 * (w - n * (kBWords / 4));
            const int t = tok0 + n < a.m ? tok0 + n : a.m - 1;
            cp_async16(&st.b[n * kBStride + k], (const uint32_t *)(Xb + (int64_t)t * a.ldx + (int64_t)kb * 8) + k);
        }
    } else {
        for (int w = threadIdx.x; w < kBN * kBWords; w += kMqThreads) {
            const int n = w / kBWords, k = w - n * kBWords;
            const int t = tok0 + n < a.m ? tok0 + n : a.m - 1;
            cp_async4(&st.b[n * kBStride + k], (const uint32_t *)(Xb + (int64_t)t * a.ldx + (int64_t)kb * 8) + k);
        }
    }
}

__global__ void __launch_bounds__(kMqThreads) q2k_mmq_kernel(q2k::Args a)
{
    as_d_pdl_wait();
    __shared__ Stage sm[2];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    const int64_t b = blockIdx.z;
    const int row0 = (int)blockIdx.x * kBM, tok0 = (int)blockIdx.y * kBN;
    const AsBlockQ2K *Wb = a.W + b * a.strideW;
    const AsBlockQ8_1 *Xb = a.x + b * a.strideX;
    const int wrow = warp * 16 * kMT; // the warp's first row in the tile; its rows [mt][e]: wrow + 16 mt + 8 e + g

    float acc[kMT][kNT][4];
#pragma unroll
    for (int mt = 0; mt < kMT; mt++)
#pragma unroll
        for (int nt = 0; nt < kNT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                acc[mt][nt][i] = 0.0f;

    const int nb = a.n_in / AS_QK_K;
    load_stage(sm[0], a, Wb, Xb, row0, tok0, 0);
    cp_async_commit();
    for (int kb = 0; kb < nb; kb++) {
        if (kb + 1 < nb) // the other stage was released by the barrier that ended step kb - 1
            load_stage(sm[(kb + 1) & 1], a, Wb, Xb, row0, tok0, kb + 1);
        cp_async_commit(); // possibly empty: wait_group 1 then always means "block kb has landed"
        cp_async_wait1();
        __syncthreads();
        const Stage &st = sm[kb & 1];

        float bd[kMT][kNT][4], bm[kMT][kNT][4];
#pragma unroll
        for (int mt = 0; mt < kMT; mt++)
#pragma unroll
            for (int nt = 0; nt < kNT; nt++)
#pragma unroll
                for (int i = 0; i < 4; i++)
                    bd[mt][nt][i] = bm[mt][nt][i] = 0.0f;

#pragma unroll
        for (int half = 0; half < 2; half++) {
            // Words of this thread's rows for weights 128 half .. 128 half + 127: qs words 8 half + 4 hh + c
            // (k 4c..4c+3 of sub-block hh of q8_1 block 4 half + jj, at shift 2 jj) and scale words
            // 2 half + hh (the scales of sub-blocks 8 half .. 8 half + 7).
            uint32_t qw[kMT][2][2], sw[kMT][2][2];
#pragma unroll
            for (int mt = 0; mt < kMT; mt++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const uint32_t *row = st.a + (wrow + 16 * mt + 8 * e + g) * kAStride;
#pragma unroll
                    for (int hh = 0; hh < 2; hh++) {
                        qw[mt][e][hh] = row[4 + 8 * half + 4 * hh + c];
                        sw[mt][e][hh] = row[2 * half + hh];
                    }
                }
#pragma unroll
            for (int jj = 0; jj < 4; jj++) { // q8_1 block j = 4 half + jj: weights 128 half + 32 jj + (0..31)
                const int j = 4 * half + jj;
                // A: sub-blocks sa = 8 half + 2 jj (k 0..15) and sa + 1 (k 16..31); their scale bytes sit
                // in scale word 2 half + jj / 2 at bytes 2 (jj % 2) and 2 (jj % 2) + 1.
                uint32_t ad[kMT][4], am[kMT][4];
#pragma unroll
                for (int mt = 0; mt < kMT; mt++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const uint32_t w = sw[mt][e][jj >> 1] >> (16 * (jj & 1));
                        const uint32_t sa = w & 0xffu, sb = (w >> 8) & 0xffu;
                        ad[mt][e] = ((qw[mt][e][0] >> (2 * jj)) & 0x03030303u) * (sa & 0xfu);
                        ad[mt][2 + e] = ((qw[mt][e][1] >> (2 * jj)) & 0x03030303u) * (sb & 0xfu);
                        am[mt][e] = (sa >> 4) * 0x01010101u;
                        am[mt][2 + e] = (sb >> 4) * 0x01010101u;
                    }
                // B: token 8 nt + g of the tile, q8_1 block j, qs ints c and 4 + c; C columns 2c, 2c + 1
                // take the scales d of tokens 8 nt + 2c, 8 nt + 2c + 1.
                uint32_t b0[kNT], b1[kNT];
                float d8[kNT][2];
#pragma unroll
                for (int nt = 0; nt < kNT; nt++) {
                    const uint32_t *xb = st.b + (8 * nt + g) * kBStride + 9 * j;
                    b0[nt] = xb[1 + c];
                    b1[nt] = xb[5 + c];
#pragma unroll
                    for (int e = 0; e < 2; e++)
                        d8[nt][e] = q2k::h2f((uint16_t)(st.b[(8 * nt + 2 * c + e) * kBStride + 9 * j] & 0xffffu));
                }
#pragma unroll
                for (int mt = 0; mt < kMT; mt++)
#pragma unroll
                    for (int nt = 0; nt < kNT; nt++) {
                        int id[4], im[4];
                        mma_s8_bias(id, ad[mt], b0[nt], b1[nt]);
                        mma_s8_bias(im, am[mt], b0[nt], b1[nt]);
#pragma unroll
                        for (int i = 0; i < 4; i++) {
                            bd[mt][nt][i] = q2k::fmaf_rn(d8[nt][i & 1], q2k::unbias(id[i]), bd[mt][nt][i]);
                            bm[mt][nt][i] = q2k::fmaf_rn(d8[nt][i & 1], q2k::unbias(im[i]), bm[mt][nt][i]);
                        }
                    }
            }
        }
#pragma unroll
        for (int mt = 0; mt < kMT; mt++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const uint32_t dm = st.a[(wrow + 16 * mt + 8 * e + g) * kAStride + 20];
                const float dx = q2k::h2f((uint16_t)(dm & 0xffffu)), dy = q2k::h2f((uint16_t)(dm >> 16));
#pragma unroll
                for (int nt = 0; nt < kNT; nt++)
#pragma unroll
                    for (int i = 2 * e; i < 2 * e + 2; i++)
                        acc[mt][nt][i] = __fadd_rn(acc[mt][nt][i],
                                                   q2k::fmaf_rn(dx, bd[mt][nt][i], -__fmul_rn(dy, bm[mt][nt][i])));
            }
        __syncthreads(); // every warp is done with stage kb & 1 before it is refilled
    }

#pragma unroll
    for (int mt = 0; mt < kMT; mt++)
#pragma unroll
        for (int nt = 0; nt < kNT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int o = row0 + wrow + 16 * mt + 8 * (i >> 1) + g, t = tok0 + 8 * nt + 2 * c + (i & 1);
                if (o < a.n_out && t < a.m) {
                    const int64_t off = b * a.strideY + (int64_t)t * a.ldy + o;
                    if (a.y_f32)
                        ((float *)a.y)[off] = acc[mt][nt][i];
                    else
                        ((uint16_t *)a.y)[off] = as_d_f32_to_bf16(acc[mt][nt][i]);
                }
            }
}

#ifndef AS_EMU
#endif

} // namespace

#ifndef AS_EMU
extern "C" int as_k_q2k_mmq(const void *W, int64_t ldw, int64_t strideW, int n_out, int n_in, const void *xq,
                            int64_t ldx, int64_t strideX, int m, void *y, int64_t ldy, int64_t strideY, int y_f32,
                            int batch, cudaStream_t st)
{
    bool empty;
    const int bad = q2k::check_args(W, ldw, strideW, n_out, n_in, xq, ldx, strideX, m, y, ldy, strideY, y_f32, batch,
                                    &empty);
    if (bad || empty)
        return bad;
    const int64_t gx = ((int64_t)n_out + kBM - 1) / kBM, gy = ((int64_t)m + kBN - 1) / kBN;
    if (gy > 65535 || gx > 0x7fffffff)
        return (int)cudaErrorInvalidValue;
    const q2k::Args a{(const AsBlockQ2K *)W, ldw, strideW, n_out, n_in, (const AsBlockQ8_1 *)xq, ldx, strideX, m, y,
                    ldy, strideY, y_f32 ? 1 : 0, mmq_b16(xq, ldx, strideX, batch) ? 1 : 0};
    as_launch(q2k_mmq_kernel, dim3((unsigned)gx, (unsigned)gy, (unsigned)batch), kMqThreads, 0, st, a);
    return AS_LAUNCH_RESULT();
}
#endif
