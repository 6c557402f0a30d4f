/* Serial BLAS, parallel by OpenMP (ref/gemm.h). */
#include "ref/gemm.h"

#include <cblas.h>
#include <pthread.h>

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
#pragma omp parallel for num_threads(nt) schedule(dynamic) if (nblk > 1 && m * n * k >= (1 << 20))
    for (int64_t j = 0; j < nblk; j++) {
        if (as_ref_cancelled())
            continue;
        int64_t n0 = j * blk, nn = n - n0 < blk ? n - n0 : blk;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)nn, (int)k, 1.0f, a, (int)lda,
                    b + n0 * ldb, (int)ldb, 0.0f, c + n0, (int)ldc);
    }
}
