/* BLAS under the reference's own threads. OpenBLAS runs single-threaded (its pthread pool spins
 * for a long while after each call and would fight the OpenMP threads on a small machine);
 * parallel work is split by OpenMP, each thread calling the serial sgemm on its own block. */
#ifndef AS_GEMM_H
#define AS_GEMM_H

#include <stdint.h>

/* Puts OpenBLAS in single-thread mode, once (called by every reference entry that uses BLAS). */
void as_blas_serial(void);

/* C[m][n] = A[m][k] . B[n][k]^T (row-major, f32; the summation order inside each dot product is
 * BLAS's), split over as_ref_threads() threads by blocks of C's columns. */
void as_sgemm_nt(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                 float *c, int64_t ldc);

#endif
