/* An engine's device allocations under its GPU memory limit (AsEngineKnobs.gpu_mem_limit_mb): they
 * behave as if the device had that many MiB for the engine, so that an out-of-memory at set-up or in the
 * middle of a run can be forced on any GPU (tests/test_hardening_gpu.c). Without a limit these are
 * cudaMalloc and cudaMemGetInfo. The limit counts what has been taken since the engine measured the
 * device's free memory (by the engine, cuBLAS and the CUDA runtime). */
#ifndef AS_ENGINE_MEM_LIMIT_H
#define AS_ENGINE_MEM_LIMIT_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#include "model/errors.h"

typedef struct {
    size_t limit;      /* bytes; 0: no limit */
    size_t base_free;  /* the device's free memory when the limit was set */
} AsMemLimit;

/* No limit for limit_mb 0; else the limit, from the current device's free memory now. */
cudaError_t as_mem_limit_init(AsMemLimit *m, int limit_mb);
cudaError_t as_dev_malloc(const AsMemLimit *m, void **p, size_t bytes);
/* cudaMemGetInfo as the engine sees it: under a limit, free is what is left of it. */
cudaError_t as_dev_mem_info(const AsMemLimit *m, size_t *free_b, size_t *total_b);

/* The out-of-memory error every engine allocation reports: what, how much was asked, how much the
 * device has (sizes in B / KiB / MiB / GiB as fits). Clears the CUDA error. Returns AS_ERUNTIME. */
int as_dev_oom(const AsMemLimit *m, AsError *err, const char *what, size_t asked, int device, cudaError_t rc);

#endif
