/* Serial BLAS, parallel by OpenMP (ref/gemm.h). */
#include "ref/gemm.h"

#include <cblas.h>
#include <pthread.h>
#include <string.h>

#include "ref/cancel.h"
#include "ref/linear.h"

void openblas_set_num_threads(int num_threads); /* in OpenBLAS's cblas.h; declared for other headers */

static pthread_once_t serial_once = PTHREAD_ONCE_INIT;
static void set_serial(void) { openblas_set_num_threads(1); }
void as_blas_serial(void) { pthread_once(&serial_once, set_serial); }

void as_sgemm_nt(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                 float *c, int64_t ldc)
{
    if (m <= 0 || n <= 0)
        return;
    as_blas_serial();
    const int nt = as_ref_threads();
    /* column blocks of C (rows of B), at least 16 wide, a few per thread for balance */
    int64_t blk = (n + 4 * nt - 1) / (4 * nt);
    blk = blk < 16 ? 16 : (blk + 15) & ~(int64_t)15;
    const int64_t nblk = (n + blk - 1) / blk;
    /* and bands of at most MROWS rows of C, so that a cancel is seen within one band's time (each
     * element's dot product is the same whatever the tiling) */
    enum { MROWS = 4096 };
    const int64_t nband = (m + MROWS - 1) / MROWS, ntile = nblk * nband;
#pragma omp parallel for num_threads(nt) schedule(dynamic) if (ntile > 1 && m * n * k >= (1 << 20))
    for (int64_t j = 0; j < ntile; j++) {
        int64_t n0 = (j % nblk) * blk, nn = n - n0 < blk ? n - n0 : blk;
        int64_t m0 = (j / nblk) * MROWS, mm = m - m0 < MROWS ? m - m0 : MROWS;
        if (as_ref_cancelled()) { /* zeros: what follows in the cancelled layer stays finite */
            for (int64_t r = 0; r < mm; r++)
                memset(c + (m0 + r) * ldc + n0, 0, sizeof *c * (size_t)nn);
            continue;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)mm, (int)nn, (int)k, 1.0f, a + m0 * lda, (int)lda,
                    b + n0 * ldb, (int)ldb, 0.0f, c + m0 * ldc + n0, (int)ldc);
    }
}
