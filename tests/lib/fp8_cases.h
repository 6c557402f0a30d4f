/* fp8 weights and activations for the tests of the fp8 kernels and of the fp8 form (tests/lib/fp8_cases.c):
 * F8_E4M3 weights with e8m0 block scales of edge 32 or 128, drawn over the whole e4m3 range or on an
 * "exact grid", where every 32-wide block's sum is exact in any accumulator the hardware may use. */
#ifndef AS_TEST_FP8_CASES_H
#define AS_TEST_FP8_CASES_H

#include <stdint.h>

#include "model/weights.h"

typedef struct {
    uint8_t *codes, *scale_bytes;
    AsWTensor w, scale;
} AsTestFp8W;

/* rows x cols codes (cols a multiple of 32) and e8m0 scales of block B (32 or 128), scales 2^-10 .. 2^-3.
 * grid 0: any code but NaN; grid 1: magnitudes 1 .. 1.875 (one exponent), random signs. */
void as_test_fp8w_make(AsTestFp8W *f, int64_t rows, int64_t cols, int B, int grid, uint64_t seed);
void as_test_fp8w_free(AsTestFp8W *f);

/* s rows of n bf16 activations. grid 0: uniform in +-1 times a magnitude that varies by block of 32
 * (2^-12 .. 2^4, and now and then a block below act_quant's 1e-4 floor); grid 1: each block of 32 is
 * v * 2^e with e per block and v in +-{256, 288, ..., 448}, one 448 in every block, so that act_quant's
 * codes are v and its scale 2^e exactly. */
void as_test_fp8_x(float *x, int64_t s, int64_t n, int grid, uint64_t seed);

/* A bf16 activation grid for the bf16 linear of fp8-form weights: per block of 32, +-(1 .. 1.9375) in
 * sixteenths times 2^e (e per block): with grid-1 weights every product is a multiple of 2^(e-7) below
 * 2^(e+1) and a block's sum is exact. */
void as_test_bf16_grid_x(float *x, int64_t s, int64_t n, uint64_t seed);

/* mag[t][o] = sum_k sum_{i in k} |xq[t][i] Wq[o][i]| sx[t][k] Ws[o][k] (act_quant of x) in double: the size of
 * the terms whose f32 order may differ. act 0: x through act_quant (the fp8 linear); act 1: x as it is
 * against the dequantised weight (the bf16 linear). */
void as_test_fp8_magnitudes(const float *x, int64_t s, const AsWTensor *w, int act, double *mag);

#endif
