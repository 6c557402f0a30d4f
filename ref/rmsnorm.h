#ifndef AS_RMSNORM_H
#define AS_RMSNORM_H

#include <stdint.h>

/* Per row of n: r = x * 1/sqrt(mean(x^2) + eps) in f32; y = bf16(w * r). y may alias x. */
void as_rmsnorm(const float *x, const float *w, float *y, int64_t rows, int64_t n, float eps);

#endif
