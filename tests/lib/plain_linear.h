/* The projections by their definitions, in double (tests/lib/plain_linear.c). */
#ifndef AS_TEST_PLAIN_LINEAR_H
#define AS_TEST_PLAIN_LINEAR_H

#include "model/weights.h"

/* Nearest e4m3 value by enumerating the grid (ties to the even code). */
float as_plain_e4m3(float v);
/* The power of two at or above v (v > 0), through frexp. */
float as_plain_pow2_ceil(double v);
/* x . W[o] in double over W's decoded row. */
double as_plain_dot_w(const float *x, const AsWTensor *w, int o);
/* y = bf16(x W^T), each dot in double. */
void as_plain_linear(const float *x, int s, const AsWTensor *w, float *y);
/* SPEC 2's fp8 linear: act_quant by brute force, the 32-wide blocks' partials times both scales added
 * in block order, in double. */
void as_plain_fp8_linear(const float *x, int s, const AsWTensor *w, float *y);
/* One of the five fp8 projections in the model's precision. */
void as_plain_proj(const AsModel *m, const float *x, int s, const AsWTensor *w, float *y);

#endif
