/* How many threads the reference uses: OpenMP regions ask as_ref_threads() explicitly (the
 * OpenMP default is per calling thread, and the reference may run off the main thread), and
 * OpenBLAS gets the same count. */
#include "ref/linear.h"

#include <omp.h>
#include <stdatomic.h>

void openblas_set_num_threads(int num_threads); /* cblas.h, whichever BLAS header is installed */

static atomic_int g_threads; /* 0: not set, OpenMP's default (OMP_NUM_THREADS or all cores) */

void as_ref_set_threads(int n)
{
    if (n <= 0)
        n = omp_get_num_procs();
    atomic_store(&g_threads, n);
    openblas_set_num_threads(n);
}

int as_ref_threads(void)
{
    int n = atomic_load(&g_threads);
    return n > 0 ? n : omp_get_max_threads();
}
