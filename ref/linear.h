/* y[t][o] = sum_i x[t][i] * W[o][i], products and sum in f32 (any order), for s rows of x.
 * W is read in place from its file (bf16, f32, fp8+scale, quantised blocks) and decoded in
 * panels; s == 1 takes a multithreaded GEMV, larger s a BLAS sgemm over decoded panels. */
#ifndef AS_LINEAR_H
#define AS_LINEAR_H

#include <stdbool.h>
#include <stdint.h>

#include "model/weights.h"

/* round_bf16: store bf16(y) (the bf16 linear of SPEC 2); false keeps f32 (the ratio-2
 * compressor's wkv / wgate). Rows [o0, o0 + nout) of W only (nout = -1: all rows). */
void as_linear_rows(const float *x, int64_t s, const AsWTensor *w, int64_t o0, int64_t nout,
                    float *y, int64_t ldy, bool round_bf16);
static inline void as_linear(const float *x, int64_t s, const AsWTensor *w, float *y, bool round_bf16)
{
    as_linear_rows(x, s, w, 0, -1, y, -1, round_bf16);
}
/* Threads used by the reference (0 = all cores). */
void as_ref_set_threads(int n);
int as_ref_threads(void);

#endif
