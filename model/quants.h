/* ggml's quantised formats on the CPU, bit for bit: the Q8_0 and Q2_K weight quantisers that
 * write GGUF files (quantize_row_q8_0_ref, quantize_row_q2_K_ref with make_qkx2_quants), their
 * dequantisers (the exact f32 weights the reference computes on), and the CPU twin of the GPU
 * path: q8_1 activation blocks and the Q2_K x q8_1 / Q8_0 x q8_1 dot products as ggml's CUDA
 * mul_mat_vec_q computes them. Block layouts: model/ggml_blocks.h.
 *
 * Every float operation below is one IEEE f32 operation rounded to nearest even, in the order
 * written, with NO fused multiply-add (the build uses -ffp-contract=off). Pointers to blocks
 * must be aligned for the block type: callers holding unaligned file data memcpy blocks out. */
#ifndef AS_QUANTS_H
#define AS_QUANTS_H

#include <stdint.h>

#include "model/ggml_blocks.h"

/* IEEE binary16 <-> f32. to_fp16 rounds to nearest even (subnormals, overflow to inf, NaN kept),
 * as GGML_FP32_TO_FP16 (F16C _cvtss_sh or ggml's software path) does; to_fp32 is exact. */
uint16_t as_fp32_to_fp16(float f);
float as_fp16_to_fp32(uint16_t h);

/* ggml's nearest_int: round to nearest, ties to even, by adding 1.5 * 2^23 and reading the
 * mantissa. Exact for |f| <= 2^22 - 1; beyond that (ggml asserts in debug builds) it returns what
 * ggml's release build computes, so that even degenerate inputs quantise identically. */
int as_nearest_int(float f);

/* ---- weights (k: a multiple of the block: 32 for Q8_0, 256 for Q2_K) ---- */

/* quantize_row_q8_0_ref: per 32 values amax = max|x|, d = amax / 127, id = d ? 1/d : 0,
 * q = roundf(x * id) (half away from zero); d stored as fp16. A non-finite x * id (only for
 * amax below ~1.3e-38, where 1/d overflows; ggml's float-to-int cast is then undefined) gives 0. */
void as_quantize_row_q8_0(const float *x, AsBlockQ8_0 *y, int64_t k);
/* dequantize_row_q8_0: y = q * fp32(d). */
void as_dequantize_row_q8_0(const AsBlockQ8_0 *x, float *y, int64_t k);

/* quantize_row_q2_K_ref: each 16-value sub-block fitted by make_qkx2_quants(nmax 3, weights |x|,
 * rmin -0.5, rdelta 0.1, nstep 15, mean absolute deviation), the 16 scales and 16 mins quantised
 * to 4 bits against the super-block's largest (d = fp16(max_scale / 15), dmin = fp16(max_min /
 * 15)), then every value re-rounded to the nearest of its sub-block's 4 levels. */
void as_quantize_row_q2_K(const float *x, AsBlockQ2K *y, int64_t k);
/* dequantize_row_q2_K: weight i of a super-block, sub-block j = i / 16 (scale byte sc = scales[j]),
 * 2-bit code q = (qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3:
 *   y = (fp32(d) * (sc & 15)) * q - (fp32(dmin) * (sc >> 4)), each product and the difference
 *   rounded to f32 separately. */
void as_dequantize_row_q2_K(const AsBlockQ2K *x, float *y, int64_t k);

/* ---- activations and the dot products of the GPU path ---- */

/* q8_1 as ggml's CUDA quantize_q8_1 does it, per block of 32 values:
 *   amax = max |x|                        (exact)
 *   d    = amax / 127.0f                  (f32 division)
 *   q    = amax == 0 ? 0 : roundf(x / d)  (f32 division, then half away from zero; |q| <= 127)
 *   y.d  = fp16(d)                        (the dot products read d back from fp16)
 *   y.s  = fp16(d * (float)sum(q))        (ggml's CPU quantize_row_q8_1_ref form; CUDA stores
 *                                          fp16(sum(x)) instead. The dot products below never
 *                                          read s.)
 * Note: the division x / d (CUDA) differs from ggml's CPU reference x * (1/d) in rare last-bit
 * cases; the GPU kernel must divide. k: a multiple of 32. */
void as_quantize_row_q8_1(const float *x, AsBlockQ8_1 *y, int64_t k);

/* One output of a Q2_K projection on the GPU path: the row x (nb super-blocks) against the
 * activation y (8 * nb q8_1 blocks), exactly as ggml's mul_mat_vec_q with vec_dot_q2_K_q8_1 and
 * ONE warp of 32 lanes per output row computes it. All int arithmetic is exact; every float
 * operation is a separate f32 multiply or add (the kernel writes __fmul_rn / __fadd_rn /
 * __fsub_rn, or compiles with --fmad=false, so that nothing is fused):
 *
 *   Slot (b, t), t = 0..15 (ggml's iqs), covers bytes qs[32n + 4c .. 32n + 4c + 3] of
 *   super-block b, n = t / 8, c = t % 8: 16 weights, 4 per q8_1 block. Its partial p(b, t):
 *     sumf_d = 0.0f; sumf_m = 0.0f;
 *     for i = 0..3:                                     (in this order)
 *       a   = y[8b + 4n + i]                            (q8_1 block of weights 128n + 32i ..)
 *       sc  = scales[8n + 2i + c / 4]                   (sub-block of those 4 weights)
 *       d8  = fp32(a.d)
 *       dot = sum_k=0..3 ((qs[32n + 4c + k] >> 2i) & 3) * a.qs[4c + k]     (int, dp4a)
 *       sm  = sum_k=0..3 (sc >> 4) * a.qs[4c + k]                           (int, dp4a)
 *       sumf_d = sumf_d + d8 * (float)(dot * (sc & 15))
 *       sumf_m = sumf_m + d8 * (float)sm
 *     p(b, t) = fp32(x[b].d) * sumf_d - fp32(x[b].dmin) * sumf_m
 *   Lane L = 0..31 owns the slots with t = L % 16 and b = L / 16, L / 16 + 2, L / 16 + 4, ...
 *   (b < nb), and accumulates acc_L = 0.0f; acc_L = acc_L + p(b, t) in increasing b.
 *   The warp sum is the xor butterfly (__shfl_xor_sync): for off = 16, 8, 4, 2, 1, every lane
 *   at once acc_L = acc_L + acc_(L ^ off). The result is acc_0 (every lane holds the same).
 * The caller rounds the f32 result to bf16 as the linear of SPEC 2 does. */
float as_vec_dot_q2_K_q8_1(const AsBlockQ2K *x, const AsBlockQ8_1 *y, int64_t nb);

/* The same for a Q8_0 row of nb blocks against nb q8_1 blocks (vec_dot_q8_0_q8_1, vdr 2):
 *   slot (b, t), t = 0..3, covers weights 8t .. 8t + 7 of block b:
 *     sumi = sum_k=0..7 x[b].qs[8t + k] * y[b].qs[8t + k]            (int, two dp4a)
 *     p(b, t) = (fp32(x[b].d) * fp32(y[b].d)) * (float)sumi
 *   Lane L owns t = L % 4 and b = L / 4, L / 4 + 8, ... in increasing b; the same butterfly. */
float as_vec_dot_q8_0_q8_1(const AsBlockQ8_0 *x, const AsBlockQ8_1 *y, int64_t nb);

#endif
