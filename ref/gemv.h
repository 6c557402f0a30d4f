/* Matrix-vector kernels of the decode linear (ref/linear.c): y[o] = sum_i x[i] * W[o][i] for n
 * rows of W read in place, in f32 with any summation order (FMA inside the accumulation).
 * Rows are at w + o * cols elements; w may be unaligned. Serial: the caller splits rows over
 * threads. AVX-512 / AVX2+FMA variants are picked at run time, with a portable fallback. */
#ifndef AS_GEMV_H
#define AS_GEMV_H

#include <stdbool.h>
#include <stdint.h>

typedef enum { AS_ISA_AUTO, AS_ISA_PORTABLE, AS_ISA_AVX2, AS_ISA_AVX512 } AsIsa;

void as_gemv_bf16(const float *x, const void *w, int64_t cols, int64_t n, float *y);
void as_gemv_f32(const float *x, const void *w, int64_t cols, int64_t n, float *y);
/* F8_E4M3 rows with block x block scales (32 or 128), each weight decoded on the fly exactly as
 * as_wt_rows_f32 does (bf16(fp8 * scale)). Row o is row r0 + o of the tensor; scale holds the
 * f32 scales of block rows r0/block .. (r0 + n - 1)/block, ldscale apart. false: no vector variant
 * on this CPU (the caller decodes rows and uses as_gemv_f32). */
bool as_gemv_fp8(const float *x, const void *w, int64_t cols, int64_t n, int64_t r0, const float *scale,
                 int64_t ldscale, int block, float *y);

/* Which variant runs; forcing one (tests) returns -1 when this CPU lacks it. */
AsIsa as_gemv_isa(void);
int as_gemv_force_isa(AsIsa isa);
const char *as_isa_name(AsIsa isa);

#endif
