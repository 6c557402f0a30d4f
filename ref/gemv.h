/* Matrix-vector kernels of the decode linear (ref/linear.c): y[o] = sum_i x[i] * W[o][i] for n
 * rows of W read in place, in f32 with any summation order (FMA inside the accumulation).
 * Rows are at w + o * cols elements; w may be unaligned. Serial: the caller splits rows over
 * threads. AVX-512 / AVX2+FMA variants are picked at run time, with a portable fallback. */
#ifndef AS_GEMV_H
#define AS_GEMV_H

#include <stdint.h>

typedef enum { AS_ISA_AUTO, AS_ISA_PORTABLE, AS_ISA_AVX2, AS_ISA_AVX512 } AsIsa;

void as_gemv_bf16(const float *x, const void *w, int64_t cols, int64_t n, float *y);
void as_gemv_f32(const float *x, const void *w, int64_t cols, int64_t n, float *y);

/* Which variant runs; forcing one (tests) returns -1 when this CPU lacks it. */
AsIsa as_gemv_isa(void);
int as_gemv_force_isa(AsIsa isa);
const char *as_isa_name(AsIsa isa);

#endif
