/* The fp8 linear of SPEC 2 (model.py's act_quant + fp8_gemm), for the fp8 projections in fp8
 * precision: each input row is quantised in blocks of 32 (act_quant: e4m3 values, ue8m0 scales);
 * then for each 32-wide block k of `in`, in order, p_k = sum_{i in k} xq[i] * Wq[o][i] (f32),
 * acc += p_k * sx[t][k] * Ws[o / B][32 k / B] (f32), and y = bf16(acc). W is an F8_E4M3 weight
 * with its e8m0 (or f32 / bf16) block scale of edge B = 32 or 128, read in place. */
#ifndef AS_FP8_LINEAR_H
#define AS_FP8_LINEAR_H

#include <stdbool.h>
#include <stdint.h>

#include "model/weights.h"

/* Rows [o0, o0 + nout) of W (nout = -1: all), y[t][o - o0] at ldy (-1: nout). The input width must
 * be a multiple of 32 (model/precision.c refuses fp8 precision otherwise). */
void as_fp8_linear_rows(const float *x, int64_t s, const AsWTensor *w, int64_t o0, int64_t nout, float *y,
                        int64_t ldy);
static inline void as_fp8_linear(const float *x, int64_t s, const AsWTensor *w, float *y)
{
    as_fp8_linear_rows(x, s, w, 0, -1, y, -1);
}

/* How the weight's block scales are read: {0, false} is the reference's (the function above); the others
 * are conventions engines get wrong (ref/convention.h). */
typedef struct {
    int block_as;    /* 0: the scale's own block edge; 32 or 128: the weight coordinates mapped to scale
                      * blocks of that edge instead (an index past the scale grid reads its last row or
                      * column, as a bounds-checked gather does) */
    bool e8m0_byte;  /* an F8_E8M0 scale's exponent byte taken as the scale's value (e, not 2^(e-127)) */
} AsFp8Way;

void as_fp8_linear_rows_in(const float *x, int64_t s, const AsWTensor *w, int64_t o0, int64_t nout, float *y,
                           int64_t ldy, const AsFp8Way *way);

#endif
