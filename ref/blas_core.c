/* OpenBLAS's kernel choice (ref/blas_core.h). */
#include "ref/blas_core.h"

#include <cblas.h>
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>

/* The cores whose sgemm uses AVX2 + FMA or AVX-512 (OpenBLAS 0.3's names) */
static const char *const vector_cores[] = {"Haswell", "SkylakeX", "Cooperlake", "SapphireRapids", "Zen"};

const char *as_blas_core_wanted(const char *corename, bool avx2_fma, bool avx512)
{
    if (!corename || !avx2_fma)
        return NULL;
    for (size_t i = 0; i < sizeof vector_cores / sizeof vector_cores[0]; i++)
        if (!strcasecmp(corename, vector_cores[i]))
            return NULL;
    return avx512 ? "SkylakeX" : "Haswell";
}

void as_blas_core_check(char **argv)
{
    if (getenv("OPENBLAS_CORETYPE")) /* the user's choice (and the re-executed program's) */
        return;
    __builtin_cpu_init();
    const bool avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    const char *want = as_blas_core_wanted(openblas_get_corename(), avx2_fma, avx512);
    if (!want || setenv("OPENBLAS_CORETYPE", want, 1))
        return;
    execv("/proc/self/exe", argv);
}

const char *as_blas_core_name(void) { return openblas_get_corename(); }
