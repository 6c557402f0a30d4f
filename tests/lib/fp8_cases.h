/* fp8 weights for the tests of the fp8 form and its kernels (tests/lib/fp8_cases.c): F8_E4M3 weights with
 * e8m0 block scales of edge 32 or 128, drawn over the whole e4m3 range or on a grid of one exponent. */
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

#endif
