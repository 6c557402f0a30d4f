// RMSNorm of rows (twin: ref/rmsnorm.c, test: tests/gpu_rmsnorm.c): the math in rmsnorm_row.cuh.
// Launch: one block of 256 threads per row (grid = rows). y may alias x.
#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/rmsnorm_row.cuh"

namespace {

__global__ void rmsnorm_kernel(const uint16_t *x, int64_t ldx, const float *w, uint16_t *y, int64_t ldy, uint16_t *yq,
                               int64_t ldq, int n, float eps)
{
    as_d_pdl_wait();
    const int64_t r = blockIdx.x;
    as_d_rmsnorm_row(x + r * ldx, w, y + r * ldy, yq ? yq + r * ldq : nullptr, n, eps);
}

} // namespace

extern "C" int as_k_rmsnorm_qdq(const as_bf16_t *x, int64_t ldx, const float *w, as_bf16_t *y, int64_t ldy,
                                as_bf16_t *yq, int64_t ldq, int rows, int n, float eps, cudaStream_t st)
{
    if (rows < 0 || n <= 0 || ldx < n || ldy < n || (yq && (n % 32 || ldq < n)))
        return (int)cudaErrorInvalidValue;
    if (rows == 0)
        return 0;
    if (!x || !w || !y)
        return (int)cudaErrorInvalidValue;
    // y aliasing x is only meaningful row for row (same rows, same stride); yq is a buffer of its own.
    if (((const void *)x == (const void *)y && ldx != ldy) || (const void *)yq == (const void *)x ||
        (const void *)yq == (const void *)y)
        return (int)cudaErrorInvalidValue;
    as_launch(rmsnorm_kernel, rows, kRmsThreads, 0, st, x, ldx, w, y, ldy, yq, ldq, n, eps);
    return AS_LAUNCH_RESULT();
}

extern "C" int as_k_rmsnorm(const as_bf16_t *x, int64_t ldx, const float *w, as_bf16_t *y, int64_t ldy, int rows,
                            int n, float eps, cudaStream_t st)
{
    return as_k_rmsnorm_qdq(x, ldx, w, y, ldy, nullptr, 0, rows, n, eps, st);
}
