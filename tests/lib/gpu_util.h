/* Helpers for the GPU tests: device buffers from host floats (bf16 values), back again, and
 * seeded random data. Every CUDA call is checked; a failure fails the test with the call named. */
#ifndef AS_GPU_UTIL_H
#define AS_GPU_UTIL_H

#include <stdint.h>
#include <stdlib.h>

#include "kernels/kernels.h"

/* Device copy of n floats as bf16 (the values are rounded first). Freed by as_gpu_free. */
as_bf16_t *as_gpu_bf16(const float *host, int64_t n);
float *as_gpu_f32(const float *host, int64_t n);
void *as_gpu_bytes(const void *host, size_t bytes);
void *as_gpu_alloc(size_t bytes);
void as_gpu_free(void *p);
/* Device bf16 -> host floats. */
void as_gpu_get_bf16(float *host, const as_bf16_t *dev, int64_t n);
void as_gpu_get_f32(float *host, const float *dev, int64_t n);
void as_gpu_get_bytes(void *host, const void *dev, size_t bytes);
void as_gpu_sync(const char *what);
/* Checks a launcher's return value and then synchronises, failing the test on an error. */
void as_gpu_check_launch(int rc, const char *what);

/* Deterministic random data: uniform in [-a, a], rounded to bf16 when bf16 != 0. */
void as_fill_uniform(float *x, int64_t n, float a, uint64_t seed, int bf16);

/* malloc that fails the test instead of returning NULL. */
void *as_test_xmalloc(size_t bytes);
/* Fills device memory with 0xff bytes (bf16 NaN patterns): unwritten outputs show. */
void as_gpu_poison(void *dev, size_t bytes);

/* A bf16 bit pattern that is a NaN. */
static inline int as_bf16_is_nan_bits(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f); }

typedef struct {
    int64_t bad, near, nans;
} AsBf16Diff;

/* got / want: bf16 bits of a [rows][cols] tensor. Equal bits (or NaN against NaN) match; bits within
 * max_ulp ulps (ordered; +0 against -0 is 1) are "near"; the rest are reported (first 6, with
 * coordinates) and counted as bad. */
AsBf16Diff as_diff_bf16(const char *what, const uint16_t *got, const uint16_t *want, int64_t rows, int64_t cols,
                        int max_ulp);

/* Counts elements whose bf16 values differ by more than max_ulp ulps; reports the first few. */
int64_t as_count_ulp_diffs(const float *got, const float *want, int64_t n, int max_ulp, const char *what);

#endif
