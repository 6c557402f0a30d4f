// Elementwise ops of one rounding each (twins: tests/gpu_elementwise.c):
//   as_k_bf16_to_f32   y = (float)x                      exact widening
//   as_k_scale_bf16    w = bf16(w * c)                    as_index_weights_scale (ref/indexer.c)
//   as_k_residual_add  h = bf16(h + out)                  the residual of ref/stack.c
// Launch: 256 threads, one element per thread and grid-stride (grid capped at 2^16 blocks).
// Products and sums are __fmul_rn / __fadd_rn: never contracted, rounded as the reference rounds.
#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace {

constexpr int kThreads = 256;

__global__ void bf16_to_f32_kernel(const uint16_t *x, float *y, int64_t n)
{
    as_d_pdl_wait();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = as_d_bf16_to_f32(x[i]);
}

__global__ void scale_bf16_kernel(uint16_t *w, int64_t n, float c)
{
    as_d_pdl_wait();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        w[i] = as_d_f32_to_bf16(__fmul_rn(as_d_bf16_to_f32(w[i]), c));
}

__global__ void residual_add_kernel(uint16_t *h, const uint16_t *out, int64_t n)
{
    as_d_pdl_wait();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        h[i] = as_d_f32_to_bf16(__fadd_rn(as_d_bf16_to_f32(h[i]), as_d_bf16_to_f32(out[i])));
}

} // namespace

extern "C" int as_k_bf16_to_f32(const as_bf16_t *x, float *y, int64_t n, cudaStream_t st)
{
    if (n < 0 || (n > 0 && (!x || !y)))
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return 0;
    as_launch(bf16_to_f32_kernel, as_grid_1d(n, kThreads), kThreads, 0, st, x, y, n);
    return AS_LAUNCH_RESULT();
}

extern "C" int as_k_scale_bf16(as_bf16_t *w, int64_t n, float c, cudaStream_t st)
{
    if (n < 0 || (n > 0 && !w))
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return 0;
    as_launch(scale_bf16_kernel, as_grid_1d(n, kThreads), kThreads, 0, st, w, n, c);
    return AS_LAUNCH_RESULT();
}

extern "C" int as_k_residual_add(as_bf16_t *h, const as_bf16_t *out, int64_t n, cudaStream_t st)
{
    if (n < 0 || (n > 0 && (!h || !out)))
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return 0;
    as_launch(residual_add_kernel, as_grid_1d(n, kThreads), kThreads, 0, st, h, out, n);
    return AS_LAUNCH_RESULT();
}
