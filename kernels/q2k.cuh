// Device helpers of the Q2_K projections (kernels/q8_1.cu, q2k_mmvq.cu, q2k_mmq.cu): fp16 fields,
// dp4a, byte permutes, the exact small-integer -> float conversion, and ggml's vec_dot_q2_K_q8_1
// term. Host twin: model/quants.c (as_quantize_row_q8_1, as_vec_dot_q2_K_q8_1). Under AS_EMU
// (tools/emu, the CPU emulator) the intrinsics are plain C++.
#pragma once

#include "kernels/common.cuh"
#include "model/ggml_blocks.h"

#include <cuda_fp16.h>

namespace q2k {

// ---- intrinsics (device) / their exact C++ equivalents (emulator) ----
#ifdef AS_EMU
inline float int_as_float(int v) { float f; memcpy(&f, &v, 4); return f; }
inline int dp4a(int a, int b, int c)
{
    for (int k = 0; k < 4; k++)
        c += (int)(int8_t)(a >> 8 * k) * (int)(int8_t)(b >> 8 * k);
    return c;
}
inline uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s)
{
    const uint64_t v = ((uint64_t)y << 32) | x;
    uint32_t r = 0;
    for (int k = 0; k < 4; k++)
        r |= (uint32_t)((v >> 8 * ((s >> 4 * k) & 7)) & 0xff) << 8 * k;
    return r;
}
inline float h2f(uint16_t h) { _Float16 v; memcpy(&v, &h, 2); return (float)v; }
inline uint16_t f2h(float f) { _Float16 v = (_Float16)f; uint16_t h; memcpy(&h, &v, 2); return h; }
inline float fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float fdiv_rn(float a, float b) { return a / b; }
template <class T> inline T ld(const T *p) { return *p; }
#else
__device__ __forceinline__ float int_as_float(int v) { return __int_as_float(v); }
__device__ __forceinline__ int dp4a(int a, int b, int c) { return __dp4a(a, b, c); }
__device__ __forceinline__ uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s) { return __byte_perm(x, y, s); }
__device__ __forceinline__ float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ uint16_t f2h(float f) { return __half_as_ushort(__float2half_rn(f)); }
__device__ __forceinline__ float fmaf_rn(float a, float b, float c) { return __fmaf_rn(a, b, c); }
__device__ __forceinline__ float fdiv_rn(float a, float b) { return __fdiv_rn(a, b); }
template <class T> __device__ __forceinline__ T ld(const T *p) { return __ldg(p); }
#endif

// Exact int -> float for |v| < 2^22 without I2F (a quarter-rate conversion on sm_90): an integer
// sum started at the bit pattern of 1.5 * 2^23 reads, as a float, 1.5 * 2^23 + v exactly (the ulp
// there is 1); subtracting 1.5 * 2^23 is exact. dp4a / the int8 mma take kBias as their addend.
constexpr int kBias = 0x4B400000;
constexpr float kBiasF = 12582912.0f;
__device__ __forceinline__ float unbias(int biased) { return __fadd_rn(int_as_float(biased), -kBiasF); }

// q8_1 rounding of one value by its block scale d = amax / 127: ggml's CUDA quantize_q8_1 (a true
// division, then roundf: halves away from zero); a quotient outside the int8 range (only from
// non-finite or degenerate input: inf / inf, a d that underflowed) gives 0, as the twin's to_i8.
__device__ __forceinline__ int q8_round(float x, float d, float amax)
{
    if (amax == 0.0f)
        return 0;
    const float r = roundf(fdiv_rn(x, d));
    return r >= -128.0f && r <= 127.0f ? (int)r : 0;
}

// The four scale bytes of ggml's vec_dot_q2_K_q8_1 term `iqs` (0..15): scales[scale_offset + 2i],
// scale_offset = 8 * (iqs / 8) + (iqs % 8) / 4, from the two scale words at 8 * (iqs / 8).
__device__ __forceinline__ uint32_t term_scales(uint32_t s_lo, uint32_t s_hi, int iqs)
{
    return byte_perm(s_lo, s_hi, (iqs >> 2) & 1 ? 0x7531u : 0x6420u);
}

// Weights of a term, premultiplied for dp4a: vs[i] = 2-bit quants (v >> 2i) & 3 of the 4 bytes
// times the 4-bit scale of sub-block i (<= 45 per byte, no carries), ms[i] = the 4-bit min in all
// four bytes. dp4a(vs[i], u) = dp4a(vi, u) * (sc & 0xF) and dp4a(ms[i], u) are then exactly ggml's
// two integer dot products.
__device__ __forceinline__ void term_weights(uint32_t v, uint32_t sc4, int (&vs)[4], int (&ms)[4])
{
    const uint32_t dsc = sc4 & 0x0F0F0F0Fu, mn = (sc4 >> 4) & 0x0F0F0F0Fu;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        vs[i] = (int)(((v >> 2 * i) & 0x03030303u) * ((dsc >> 8 * i) & 0xffu));
        ms[i] = (int)byte_perm(mn, 0, 0x1111u * i);
    }
}

// One term of ggml's vec_dot_q2_K_q8_1_impl_mmvq (model/quants.h: the slot p(b, t)), every float
// operation in ggml's source order:
//   sumf_d += d8[i] * (dp4a(vi, u[i]) * sc);  sumf_m += d8[i] * dp4a(m, u[i]);  (i = 0..3)
//   return dx * sumf_d - dy * sumf_m;
// with each product and sum rounded on its own (no FMA contraction: __fmul_rn / __fadd_rn), as the
// C twin computes it under -ffp-contract=off. The first sum 0 + p is p itself (p is never -0: d8 >= 0
// and the integer dot products are +0 when zero), so it is skipped.
__device__ __forceinline__ float term(const int (&vs)[4], const int (&ms)[4], const int (&u)[4], const float (&d8)[4],
                                      float dx, float dy)
{
    float sd = __fmul_rn(d8[0], unbias(dp4a(vs[0], u[0], kBias)));
    float sm = __fmul_rn(d8[0], unbias(dp4a(ms[0], u[0], kBias)));
#pragma unroll
    for (int i = 1; i < 4; i++) {
        sd = __fadd_rn(sd, __fmul_rn(d8[i], unbias(dp4a(vs[i], u[i], kBias))));
        sm = __fadd_rn(sm, __fmul_rn(d8[i], unbias(dp4a(ms[i], u[i], kBias))));
    }
    return __fadd_rn(__fmul_rn(dx, sd), -__fmul_rn(dy, sm));
}

// The arguments of both Q2_K projection kernels (q2k_mmvq.cu, q2k_mmq.cu): for each batch b,
// token row t < m and output row o < n_out, y[b][t][o] = W[b][o] . x[b][t], the weight rows ldw
// blocks apart, the q8_1 token rows ldx blocks apart, y f32 or bf16.
struct Args {
    const AsBlockQ2K *W;
    int64_t ldw, strideW;
    int n_out, n_in;
    const AsBlockQ8_1 *x;
    int64_t ldx, strideX;
    int m;
    void *y;
    int64_t ldy, strideY;
    int y_f32;
    int b16; // mmq: the q8_1 token rows are 16-byte aligned for every kb (mmq_b16): 16-byte copies
};

#ifndef AS_EMU
inline bool aligned(const void *p, uintptr_t n) { return ((uintptr_t)p & (n - 1)) == 0; }

// Both launchers' checks of the operands: cudaErrorInvalidValue for unusable ones, else 0 with
// *empty set when there is nothing to compute (the launcher then returns 0 without launching).
inline int check_args(const void *W, int64_t ldw, int64_t strideW, int n_out, int n_in, const void *xq, int64_t ldx,
                      int64_t strideX, int m, const void *y, int64_t ldy, int64_t strideY, int y_f32, int batch,
                      bool *empty)
{
    *empty = false;
    if (n_out < 0 || n_in < 0 || n_in % AS_QK_K || m < 0 || batch < 0)
        return (int)cudaErrorInvalidValue;
    if (n_out == 0 || m == 0 || batch == 0) {
        *empty = true;
        return 0;
    }
    const int64_t nb = n_in / AS_QK_K, nx = n_in / AS_QK8_1;
    if (n_in == 0 || !W || !xq || !y || ldw < nb || ldx < nx || ldy < n_out)
        return (int)cudaErrorInvalidValue;
    if (!aligned(W, 4) || !aligned(xq, 4) || !aligned(y, y_f32 ? 4 : 2))
        return (int)cudaErrorInvalidValue;
    if (batch > 1 && (strideW < 0 || strideX < 0 || strideY < 0))
        return (int)cudaErrorInvalidValue;
    if (batch > 65535 || n_in > (1 << 30))
        return (int)cudaErrorInvalidValue;
    return 0;
}
#endif // AS_EMU

} // namespace q2k
