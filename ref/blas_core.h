/* The kernels OpenBLAS runs the reference's sgemm on. OpenBLAS picks them once, when the library
 * loads, from the CPU's family and model; on a CPU it does not know (a virtual machine's generic
 * "Intel Xeon Processor", an H200 host's among them) it falls back to its Prescott (SSE3) kernels,
 * slower several times over than the AVX2 ones the CPU runs. */
#ifndef AS_BLAS_CORE_H
#define AS_BLAS_CORE_H

#include <stdbool.h>

/* The core OpenBLAS should take instead of `corename` on a CPU with these features ("SkylakeX" with
 * AVX-512 F/BW/DQ/VL, "Haswell" with AVX2 and FMA), or NULL when corename already uses them (or the
 * CPU has neither). */
const char *as_blas_core_wanted(const char *corename, bool avx2_fma, bool avx512);

/* At start-up, before any BLAS call: when OpenBLAS took a core older than this CPU and the user set
 * no OPENBLAS_CORETYPE, sets it and executes the program again (the only way to change the choice);
 * returns when there is nothing to do or the exec failed (the slow kernels then run). */
void as_blas_core_check(char **argv);

/* The core OpenBLAS runs on ("Haswell", "SkylakeX", ...), for reports. */
const char *as_blas_core_name(void);

#endif
