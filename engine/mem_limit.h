/* ATTNSCOPE_GPU_MEM_LIMIT_MB=N: the engine's allocations behave as if the device had N MiB for
 * attnscope, so that an out-of-memory at set-up or in the middle of a run can be forced on any
 * GPU (tests/test_hardening_gpu.c). Unset (the default), these are cudaMalloc and
 * cudaMemGetInfo. The first call measures the device's free memory; later calls count what
 * has been taken since (by the engine, cuBLAS and the CUDA runtime) against the limit. */
#ifndef AS_ENGINE_MEM_LIMIT_H
#define AS_ENGINE_MEM_LIMIT_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#include "model/errors.h"

cudaError_t as_dev_malloc(void **p, size_t bytes);
/* cudaMemGetInfo as the engine sees it: under a limit, free is what is left of it. */
cudaError_t as_dev_mem_info(size_t *free_b, size_t *total_b);

/* The out-of-memory error every engine allocation reports: what, how much was asked, how much the
 * device has (sizes in B / KiB / MiB / GiB as fits). Clears the CUDA error. Returns AS_ERUNTIME. */
int as_dev_oom(AsError *err, const char *what, size_t asked, int device, cudaError_t rc);

#endif
