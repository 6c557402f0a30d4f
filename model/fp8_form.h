/* The fp8 form of an F8_E4M3 weight as the engine's fp8 kernels read it (kernels/kernels.h,
 * AsFp8Weight): the e4m3 codes as they lie in the file, one byte a weight, and one f32 scale per
 * 32 x 32 block, ws[o / 32][k] (a 128 x 128 scale spread over its 16 blocks). The rows of scales are
 * padded with zeros to a multiple of 4 (16 bytes), as the GEMM copies them. */
#ifndef AS_FP8_FORM_H
#define AS_FP8_FORM_H

#include <stdbool.h>
#include <stdint.h>

#include "model/weights.h"

/* Scales a row of 32-row blocks holds: cols / 32 rounded up to a multiple of 4. */
static inline int64_t as_fp8_form_ldws(int64_t cols) { return (cols / 32 + 3) / 4 * 4; }
/* Rows of 32-row blocks: ceil(rows / 32). */
static inline int64_t as_fp8_form_scale_rows(int64_t rows) { return (rows + 31) / 32; }

/* ws[rb * ldws + k] = the block scale of t that covers rows 32 rb.. and columns 32 k.. (as_wt_rows_f32 of
 * its scale tensor), for rb < as_fp8_form_scale_rows, k < cols / 32; 0 up to ldws. t: an F8_E4M3 weight
 * with its scale (as_wt_is_fp8) and cols a multiple of 32. 0, or -1 when out of host memory. */
int as_fp8_form_scales(const AsWTensor *t, float *ws);

/* Whether every block scale of t is a power of two (an e8m0 scale always is): then bf16(e4m3 * scale),
 * the bf16 linear's dequantised weight, is e4m3 * scale exactly, and streaming the codes computes it. */
bool as_fp8_scales_pow2(const AsWTensor *t);

/* Whether streaming t's codes gives exactly the bf16 upload's weights, bf16(e4m3 * scale) = e4m3 * scale in
 * f32, with every intermediate of the engine's widening (kernels/gemv.cu) a normal f32: cols a multiple of
 * 32, every scale a power of two in [2^-100, 2^100], and no NaN code (S.1111.111), whose dequantised
 * value is NaN. */
bool as_fp8_codes_exact(const AsWTensor *t);

#endif
