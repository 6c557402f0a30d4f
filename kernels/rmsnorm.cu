// RMSNorm of rows (twin: ref/rmsnorm.c, test: tests/gpu_rmsnorm.c): the math in rmsnorm_row.cuh.
// Launch: one block of 256 threads per row (grid = rows). y may alias x.
#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/rmsnorm_row.cuh"

namespace {

__global__ void rmsnorm_kernel(const uint16_t *x, int64_t ldx, const float *w, uint16_t *y, int64_t ldy, int n,
                               float eps)
{
    as_d_pdl_wait();
    as_d_rmsnorm_row(x + (int64_t)blockIdx.x * ldx, w, y + (int64_t)blockIdx.x * ldy, n, eps);
}

} // namespace

extern "C" int as_k_rmsnorm(const as_bf16_t *x, int64_t ldx, const float *w, as_bf16_t *y, int64_t ldy, int rows,
                            int n, float eps, cudaStream_t st)
{
    if (rows < 0 || n <= 0 || ldx < n || ldy < n)
        return (int)cudaErrorInvalidValue;
    if (rows == 0)
        return 0;
    if (!x || !w || !y)
        return (int)cudaErrorInvalidValue;
    // y aliasing x is only meaningful row for row (same rows, same stride).
    if ((const void *)x == (const void *)y && ldx != ldy)
        return (int)cudaErrorInvalidValue;
    as_launch(rmsnorm_kernel, rows, kRmsThreads, 0, st, x, ldx, w, y, ldy, n, eps);
    return AS_LAUNCH_RESULT();
}
