// act_quant of the fp8 linear's input rows (SPEC 2; twin: ref/quant.c as_act_quant; test:
// tests/gpu_act_quant.c). Per block of 32 consecutive values of a row, every step as the reference
// rounds it (and as kernels/quant.cuh's fp8 KV quantiser, which keeps bf16(xq * s) instead):
//   amax = fmaxf(max_i |x_i|, 1e-4)          exact (a max)
//   s    = pow2_ceil(amax / 448)             f32 division, IEEE exponent fields
//   xq_i = e4m3(clamp(x_i / s, -448, 448))   __fdiv_rn; the ternary clamp (NaN passes, as the reference)
// The e4m3 codes (bytes) and the scales (f32) are what the fp8 GEMV and GEMM read: the row is
// quantised once per projection and every block of the projection reads the same codes.
// Launch: grid (ceil(n / 256), rows), 256 threads, one value a thread; a quantiser block is one warp
// (n is a multiple of 32, so a warp is wholly inside the row or wholly past it).
#include <cuda_fp8.h>
#include <limits.h>
#include <math.h>

#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace {

constexpr int kThreads = 256;

// The e4m3 code of y (|y| <= 448 after the clamp): round to nearest even, subnormals included; NaN
// keeps its sign with the all-ones code, as ref/numerics.c's as_e4m3_bits.
__device__ __forceinline__ uint8_t e4m3_code(float y)
{
    if (isnan(y))
        return (uint8_t)(((__float_as_uint(y) >> 24) & 0x80u) | 0x7fu);
    return (uint8_t)__nv_cvt_float_to_fp8(y, __NV_SATFINITE, __NV_E4M3);
}

__global__ void __launch_bounds__(kThreads) act_quant_kernel(const uint16_t *x, int64_t ldx, int n, uint8_t *xq,
                                                             int64_t ldq, float *sx, int64_t lds)
{
    as_d_pdl_wait();
    const int64_t r = blockIdx.y;
    const int i = (int)blockIdx.x * kThreads + (int)threadIdx.x;
    const int nk = n / 32;
    if (blockIdx.x == 0 && threadIdx.x < lds - nk) // the padding of the scale row, read by 16-byte copies
        sx[r * lds + nk + threadIdx.x] = 0.0f;
    if (i - (int)(threadIdx.x & 31) >= n) // the whole warp is past the row
        return;
    const float v = as_d_bf16_to_f32(x[r * ldx + i]);
    const float amax = as_d_warp_max(fabsf(v));
    const float s = as_d_pow2_ceil(__fdiv_rn(fmaxf(amax, 1e-4f), 448.0f));
    const float y = __fdiv_rn(v, s);
    xq[r * ldq + i] = e4m3_code(y < -448.0f ? -448.0f : y > 448.0f ? 448.0f : y);
    if ((threadIdx.x & 31) == 0)
        sx[r * lds + i / 32] = s;
}

} // namespace

#ifndef AS_EMU // host side (tools/emu runs the kernel above on the CPU)
extern "C" int as_k_act_quant(const as_bf16_t *x, int64_t ldx, int rows, int n, uint8_t *xq, int64_t ldq, float *sx,
                              int64_t lds, cudaStream_t st)
{
    if (rows < 0 || n < 0 || n % 32 || ldx < n || ldq < n || lds < n / 32 || lds - n / 32 > kThreads)
        return (int)cudaErrorInvalidValue;
    if (rows == 0 || n == 0)
        return 0;
    if (!x || !xq || !sx || rows > 65535)
        return (int)cudaErrorInvalidValue;
    const dim3 grid((unsigned)((n + kThreads - 1) / kThreads), (unsigned)rows);
    as_launch(act_quant_kernel, grid, kThreads, 0, st, x, ldx, n, xq, ldq, sx, lds);
    return AS_LAUNCH_RESULT();
}
#endif // AS_EMU
