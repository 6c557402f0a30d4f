/* How many threads the reference uses: OpenMP regions ask as_ref_threads() explicitly (the
 * OpenMP default is per calling thread, and the reference may run off the main thread).
 * OpenBLAS itself stays single-threaded (ref/gemm.h says why). */
#include "ref/linear.h"

#include <omp.h>
#include <stdatomic.h>

#include "ref/gemm.h"

static atomic_int g_threads; /* 0: not set, OpenMP's default (OMP_NUM_THREADS or all cores) */

void as_ref_set_threads(int n)
{
    if (n <= 0)
        n = omp_get_num_procs();
    atomic_store(&g_threads, n);
    as_blas_serial();
}

int as_ref_threads(void)
{
    int n = atomic_load(&g_threads);
    return n > 0 ? n : omp_get_max_threads();
}
