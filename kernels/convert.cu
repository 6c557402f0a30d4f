// f32 -> bf16 rounding (RNE) of a projection computed in f32 (f16/f32-stored weights).
#include "kernels/common.cuh"
#include "kernels/kernels.h"

__global__ void f32_to_bf16_kernel(const float *x, uint16_t *y, int64_t n)
{
    as_d_pdl_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = as_d_f32_to_bf16(x[i]);
}

extern "C" int as_k_f32_to_bf16(const float *x, as_bf16_t *y, int64_t n, cudaStream_t st)
{
    if (n < 0)
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return 0;
    int blocks = (int)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
    as_launch(f32_to_bf16_kernel, blocks, 256, 0, st, x, y, n);
    return AS_LAUNCH_RESULT();
}
