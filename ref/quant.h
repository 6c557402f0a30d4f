/* The KV / index quantisers of SPEC section 2, applied in place on rows of bf16 values. Each
 * block of consecutive channels gets its own scale; n must be a multiple of the block. */
#ifndef AS_QUANT_H
#define AS_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#define AS_FP8_BLOCK 32
#define AS_FP4_E8M0_BLOCK 32
#define AS_FP4_E4M3_BLOCK 16

/* act_quant: amax = max(max|x|, 1e-4); s = pow2_ceil(amax / 448); x = bf16(e4m3(clamp(x/s)) * s). */
void as_fp8_quant(float *x, int64_t n, int block);
/* amax = max(max|x|, 6 * 2^-126); s = pow2_ceil(amax / 6); x = bf16(e2m1(clamp(x/s, -6, 6)) * s). */
void as_fp4_quant_e8m0(float *x, int64_t n, int block);
/* amax = max(max|x|, 6 * 2^-9); s = e4m3(amax / 6); x = bf16(e2m1(clamp(x/s, -6, 6)) * s). */
void as_fp4_quant_e4m3(float *x, int64_t n, int block);
/* The two fp4 quantisers with e2m1 ties rounded to even (ties_away false: exactly the two above) or away
 * from zero (a convention engines get wrong, ref/convention.h). */
void as_fp4_quant_e8m0_ties(float *x, int64_t n, int block, bool ties_away);
void as_fp4_quant_e4m3_ties(float *x, int64_t n, int block, bool ties_away);

/* act_quant as the fp8 linear's input takes it (SPEC 2): per block of 32, xq = e4m3(clamp(x/s)) (the
 * e4m3 values themselves, in f32) and its ue8m0 scale s = pow2_ceil(max(max|x|, 1e-4) / 448), into
 * sx[n / 32]. bf16(xq * s) is exactly what as_fp8_quant leaves. n must be a multiple of 32. */
void as_act_quant(const float *x, int64_t n, float *xq, float *sx);

/* The scale one block gets (for views and flip classification). */
float as_fp8_block_scale(const float *x, int block);
float as_fp4_e8m0_block_scale(const float *x, int block);
float as_fp4_e4m3_block_scale(const float *x, int block);

#endif
