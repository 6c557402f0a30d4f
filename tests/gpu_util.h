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

/* Counts elements whose bf16 values differ by more than max_ulp ulps; reports the first few. */
int64_t as_count_ulp_diffs(const float *got, const float *want, int64_t n, int max_ulp, const char *what);

#endif
